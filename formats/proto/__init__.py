"""Protocol Buffers schemas used by ``formats`` (codec-1 value bodies only).

``baml_outbound_pb2`` is generated from ``baml_outbound.proto`` and committed;
``formats.proto.generate`` rebuilds it with grpcio-tools' bundled protoc.
"""
