from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class UserTurn(_message.Message):
    __slots__ = ("session_id", "turn", "text", "data", "files", "history", "traceparent")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TURN_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    turn: int
    text: str
    data: _struct_pb2.Value
    files: _containers.RepeatedCompositeFieldContainer[File]
    history: _containers.RepeatedCompositeFieldContainer[HistoryMessage]
    traceparent: str
    def __init__(self, session_id: _Optional[str] = ..., turn: _Optional[int] = ..., text: _Optional[str] = ..., data: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., files: _Optional[_Iterable[_Union[File, _Mapping]]] = ..., history: _Optional[_Iterable[_Union[HistoryMessage, _Mapping]]] = ..., traceparent: _Optional[str] = ...) -> None: ...

class File(_message.Message):
    __slots__ = ("name", "mime_type", "content", "uri")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    URI_FIELD_NUMBER: _ClassVar[int]
    name: str
    mime_type: str
    content: bytes
    uri: str
    def __init__(self, name: _Optional[str] = ..., mime_type: _Optional[str] = ..., content: _Optional[bytes] = ..., uri: _Optional[str] = ...) -> None: ...

class HistoryMessage(_message.Message):
    __slots__ = ("role", "content")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    role: str
    content: str
    def __init__(self, role: _Optional[str] = ..., content: _Optional[str] = ...) -> None: ...

class AgentEvent(_message.Message):
    __slots__ = ("delta", "tool_call", "tool_result", "turn_end", "handoff", "session_end", "error")
    DELTA_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    TOOL_RESULT_FIELD_NUMBER: _ClassVar[int]
    TURN_END_FIELD_NUMBER: _ClassVar[int]
    HANDOFF_FIELD_NUMBER: _ClassVar[int]
    SESSION_END_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    delta: TextDelta
    tool_call: ToolCall
    tool_result: ToolResult
    turn_end: TurnEnd
    handoff: Handoff
    session_end: SessionEnd
    error: Error
    def __init__(self, delta: _Optional[_Union[TextDelta, _Mapping]] = ..., tool_call: _Optional[_Union[ToolCall, _Mapping]] = ..., tool_result: _Optional[_Union[ToolResult, _Mapping]] = ..., turn_end: _Optional[_Union[TurnEnd, _Mapping]] = ..., handoff: _Optional[_Union[Handoff, _Mapping]] = ..., session_end: _Optional[_Union[SessionEnd, _Mapping]] = ..., error: _Optional[_Union[Error, _Mapping]] = ...) -> None: ...

class TextDelta(_message.Message):
    __slots__ = ("text",)
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: str
    def __init__(self, text: _Optional[str] = ...) -> None: ...

class ToolCall(_message.Message):
    __slots__ = ("id", "name", "args", "result")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    args: _struct_pb2.Struct
    result: _struct_pb2.Value
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., args: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., result: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class ToolResult(_message.Message):
    __slots__ = ("id", "result")
    ID_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    id: str
    result: _struct_pb2.Value
    def __init__(self, id: _Optional[str] = ..., result: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class TurnEnd(_message.Message):
    __slots__ = ("data",)
    DATA_FIELD_NUMBER: _ClassVar[int]
    data: _struct_pb2.Struct
    def __init__(self, data: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class Handoff(_message.Message):
    __slots__ = ("to", "summary")
    TO_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    to: str
    summary: str
    def __init__(self, to: _Optional[str] = ..., summary: _Optional[str] = ...) -> None: ...

class SessionEnd(_message.Message):
    __slots__ = ("reason",)
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class Error(_message.Message):
    __slots__ = ("code", "message")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: str
    message: str
    def __init__(self, code: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class TurnReply(_message.Message):
    __slots__ = ("events",)
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[AgentEvent]
    def __init__(self, events: _Optional[_Iterable[_Union[AgentEvent, _Mapping]]] = ...) -> None: ...
