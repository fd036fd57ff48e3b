from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MediaTypeEnum(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MEDIA_TYPE_UNSPECIFIED: _ClassVar[MediaTypeEnum]
    IMAGE: _ClassVar[MediaTypeEnum]
    AUDIO: _ClassVar[MediaTypeEnum]
    PDF: _ClassVar[MediaTypeEnum]
    VIDEO: _ClassVar[MediaTypeEnum]
    OTHER: _ClassVar[MediaTypeEnum]
MEDIA_TYPE_UNSPECIFIED: MediaTypeEnum
IMAGE: MediaTypeEnum
AUDIO: MediaTypeEnum
PDF: MediaTypeEnum
VIDEO: MediaTypeEnum
OTHER: MediaTypeEnum

class BamlOutboundValue(_message.Message):
    __slots__ = ("null_value", "string_value", "int_value", "float_value", "bool_value", "class_value", "enum_value", "list_value", "map_value", "media_value", "uint8array_value", "bigint_value")
    NULL_VALUE_FIELD_NUMBER: _ClassVar[int]
    STRING_VALUE_FIELD_NUMBER: _ClassVar[int]
    INT_VALUE_FIELD_NUMBER: _ClassVar[int]
    FLOAT_VALUE_FIELD_NUMBER: _ClassVar[int]
    BOOL_VALUE_FIELD_NUMBER: _ClassVar[int]
    CLASS_VALUE_FIELD_NUMBER: _ClassVar[int]
    ENUM_VALUE_FIELD_NUMBER: _ClassVar[int]
    LIST_VALUE_FIELD_NUMBER: _ClassVar[int]
    MAP_VALUE_FIELD_NUMBER: _ClassVar[int]
    MEDIA_VALUE_FIELD_NUMBER: _ClassVar[int]
    UINT8ARRAY_VALUE_FIELD_NUMBER: _ClassVar[int]
    BIGINT_VALUE_FIELD_NUMBER: _ClassVar[int]
    null_value: BamlValueNull
    string_value: str
    int_value: int
    float_value: float
    bool_value: bool
    class_value: BamlValueClass
    enum_value: BamlValueEnum
    list_value: BamlValueList
    map_value: BamlValueMap
    media_value: BamlValueMedia
    uint8array_value: bytes
    bigint_value: str
    def __init__(self, null_value: _Optional[_Union[BamlValueNull, _Mapping]] = ..., string_value: _Optional[str] = ..., int_value: _Optional[int] = ..., float_value: _Optional[float] = ..., bool_value: _Optional[bool] = ..., class_value: _Optional[_Union[BamlValueClass, _Mapping]] = ..., enum_value: _Optional[_Union[BamlValueEnum, _Mapping]] = ..., list_value: _Optional[_Union[BamlValueList, _Mapping]] = ..., map_value: _Optional[_Union[BamlValueMap, _Mapping]] = ..., media_value: _Optional[_Union[BamlValueMedia, _Mapping]] = ..., uint8array_value: _Optional[bytes] = ..., bigint_value: _Optional[str] = ...) -> None: ...

class BamlValueNull(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class BamlValueList(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[BamlOutboundValue]
    def __init__(self, items: _Optional[_Iterable[_Union[BamlOutboundValue, _Mapping]]] = ...) -> None: ...

class BamlOutboundMapEntry(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: BamlOutboundValue
    def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[BamlOutboundValue, _Mapping]] = ...) -> None: ...

class BamlValueMap(_message.Message):
    __slots__ = ("entries",)
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[BamlOutboundMapEntry]
    def __init__(self, entries: _Optional[_Iterable[_Union[BamlOutboundMapEntry, _Mapping]]] = ...) -> None: ...

class BamlValueClass(_message.Message):
    __slots__ = ("name", "fields", "type_args")
    NAME_FIELD_NUMBER: _ClassVar[int]
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    TYPE_ARGS_FIELD_NUMBER: _ClassVar[int]
    name: str
    fields: _containers.RepeatedCompositeFieldContainer[BamlOutboundMapEntry]
    type_args: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, name: _Optional[str] = ..., fields: _Optional[_Iterable[_Union[BamlOutboundMapEntry, _Mapping]]] = ..., type_args: _Optional[_Iterable[bytes]] = ...) -> None: ...

class BamlValueEnum(_message.Message):
    __slots__ = ("name", "value", "is_dynamic")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    IS_DYNAMIC_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: str
    is_dynamic: bool
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ..., is_dynamic: _Optional[bool] = ...) -> None: ...

class BamlValueMedia(_message.Message):
    __slots__ = ("media", "mime_type", "url", "base64", "file")
    MEDIA_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    BASE64_FIELD_NUMBER: _ClassVar[int]
    FILE_FIELD_NUMBER: _ClassVar[int]
    media: MediaTypeEnum
    mime_type: str
    url: str
    base64: str
    file: str
    def __init__(self, media: _Optional[_Union[MediaTypeEnum, str]] = ..., mime_type: _Optional[str] = ..., url: _Optional[str] = ..., base64: _Optional[str] = ..., file: _Optional[str] = ...) -> None: ...
