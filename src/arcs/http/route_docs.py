"""How a route documents itself for the API's OpenAPI 3.1 document (``arcs.http.openapi`` reads it off).

Each route declares its own documentation where it is registered, with Powertools' route
arguments (``summary``, ``description``, ``tags``, ``responses``; parameters and request body in
``openapi_extensions``): :func:`doc` makes them. The JSON Schema of each answer sits next to the
code that builds that answer, registered once under a name with :func:`component`. Light to
import: the routes load it, and the document's assembly (which loads every route) stays apart.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from typing import Any

JsonSchema = dict[str, Any]

#: Where the runtimes serve the document (beside Arc's API; it answers any valid token).
SPEC_PATH = "/api/v1/openapi.json"
SPEC_FILE = "openapi.json"
OPENAPI_VERSION = "3.1.0"
_REF = "#/components/schemas/"

#: Every named schema, registered by the modules that build the answers they describe.
COMPONENTS: dict[str, JsonSchema] = {}


def component(name: str, schema: JsonSchema) -> JsonSchema:
    """Registers ``schema`` under ``name`` and answers a reference to it."""
    if name in COMPONENTS and COMPONENTS[name] != schema:
        raise ValueError(f"two schemas are named {name!r}")
    COMPONENTS[name] = schema
    return ref(name)


def ref(name: str) -> JsonSchema:
    return {"$ref": _REF + name}


# --- JSON Schema shorthands ------------------------------------------------------------------------

STRING: JsonSchema = {"type": "string"}
INTEGER: JsonSchema = {"type": "integer"}
NUMBER: JsonSchema = {"type": "number"}
BOOLEAN: JsonSchema = {"type": "boolean"}
TIME: JsonSchema = {"type": "string", "format": "date-time"}
ANY: JsonSchema = {}
TRUE: JsonSchema = {"const": True}


def nullable(schema: JsonSchema) -> JsonSchema:
    kind = schema.get("type")
    if isinstance(kind, str) and set(schema) <= {"type", "format", "description"}:
        return {**schema, "type": [kind, "null"]}
    return {"anyOf": [schema, {"type": "null"}]}


def array(items: JsonSchema) -> JsonSchema:
    return {"type": "array", "items": items}


def obj(properties: Mapping[str, JsonSchema], optional: Iterable[str] = (), *, closed: bool = True) -> JsonSchema:
    """An object with these properties, all required but ``optional``; ``closed``: no others."""
    left_out = set(optional)
    schema: JsonSchema = {"type": "object", "properties": dict(properties)}
    required = [name for name in properties if name not in left_out]
    if required:
        schema["required"] = required
    if closed:
        schema["additionalProperties"] = False
    return schema


def map_of(values: JsonSchema) -> JsonSchema:
    return {"type": "object", "additionalProperties": values}


#: Every error the API answers, whoever answers it (a route, the HTTP front, API Gateway).
ERROR = component(
    "Error", obj({"success": {"const": False}, "error": {**STRING, "description": "what is wrong, for a human"}})
)


# --- parameters ------------------------------------------------------------------------------------


def _param(
    where: str, name: str, description: str, schema: JsonSchema | None, required: bool, example: object
) -> JsonSchema:
    parameter = {
        "name": name,
        "in": where,
        "required": required,
        "description": description,
        "schema": schema or STRING,
    }
    if example is not None:
        parameter["example"] = example
    return parameter


def query_param(
    name: str, description: str, schema: JsonSchema | None = None, *, required: bool = False, example: object = None
) -> JsonSchema:
    return _param("query", name, description, schema, required, example)


def header_param(
    name: str, description: str, schema: JsonSchema | None = None, *, example: object = None
) -> JsonSchema:
    return _param("header", name, description, schema, False, example)


def path_param(name: str, description: str, schema: JsonSchema | None = None, *, example: object = None) -> JsonSchema:
    return _param("path", name, description, schema, True, example)


DATABASE_HEADER = header_param("x-arc-database", "the database (default `default`)", example="metrics")
LIMIT = query_param("limit", "how many, at most (1 to 1000; default 100)", {"type": "integer", "minimum": 1})


# --- answers ---------------------------------------------------------------------------------------


def json_answer(schema: JsonSchema, description: str, headers: Mapping[str, JsonSchema] | None = None) -> JsonSchema:
    answer: JsonSchema = {"description": description, "content": {"application/json": {"schema": schema}}}
    if headers:
        answer["headers"] = {name: {"schema": value} for name, value in headers.items()}
    return answer


def binary_answer(media_type: str, description: str, headers: Mapping[str, JsonSchema] | None = None) -> JsonSchema:
    answer: JsonSchema = {"description": description, "content": {media_type: {"schema": {}}}}
    if headers:
        answer["headers"] = {name: {"schema": value} for name, value in headers.items()}
    return answer


def empty_answer(description: str, headers: Mapping[str, JsonSchema] | None = None) -> JsonSchema:
    answer: JsonSchema = {"description": description}
    if headers:
        answer["headers"] = {name: {"schema": value} for name, value in headers.items()}
    return answer


_ERRORS = {
    400: "the request is malformed or breaks a rule; the message says which (nothing changed)",
    401: "no token, or not a valid one",
    403: "the token lacks the permission or the database scope",
    404: "no such thing (or outside the token's scopes)",
    408: "the body stopped arriving",
    409: "it exists already, or conflicts with what does",
    413: "the body exceeds the route's limit",
    415: "an unsupported Content-Encoding (gzip, zstd or none)",
    429: "too many refused tokens from this address: wait `Retry-After` seconds",
    503: "cannot be done now (storage or queue unavailable, disk full): retry after `Retry-After` seconds",
    504: "the query ran past its time limit, or the server stopped before answering",
}
#: What any route behind a token may answer besides its own answers.
COMMON_ERRORS = (400, 401, 403, 404, 408, 413, 429, 503)


def error_answer(status: int) -> JsonSchema:
    """A reference to the error answer of ``status``, described once in the document."""
    return {"$ref": f"#/components/responses/Error{status}"}


def binary_errors(media_type: str, statuses: Iterable[int]) -> dict[int, JsonSchema]:
    """Error answers of a route that answers its errors in ``media_type`` rather than JSON."""
    return {
        status: binary_answer(media_type, _ERRORS[status], {"Retry-After": INTEGER} if status in (429, 503) else None)
        for status in statuses
    }


def error_answers() -> dict[str, JsonSchema]:
    return {
        f"Error{status}": json_answer(ERROR, text, {"Retry-After": INTEGER} if status in (429, 503) else None)
        for status, text in _ERRORS.items()
    }


def json_body(
    schema: JsonSchema, description: str = "", *, required: bool = True, example: object = None
) -> JsonSchema:
    media: JsonSchema = {"schema": schema}
    if example is not None:
        media["example"] = example
    body: JsonSchema = {"required": required, "content": {"application/json": media}}
    if description:
        body["description"] = description
    return body


def doc(
    summary: str,
    tag: str,
    answers: Mapping[int, JsonSchema],
    *,
    description: str | None = None,
    parameters: Sequence[JsonSchema] = (),
    body: JsonSchema | None = None,
    errors: Iterable[int] = COMMON_ERRORS,
    public: bool = False,
) -> dict[str, Any]:
    """A route's OpenAPI entry, as keyword arguments of Powertools' route decorators."""
    responses = {**{status: error_answer(status) for status in errors}, **answers}
    extra: dict[str, Any] = {}
    if parameters:
        extra["parameters"] = list(parameters)
    if body is not None:
        extra["requestBody"] = body
    if public:
        extra["security"] = []
    return {
        "summary": summary,
        "description": description,
        "tags": [tag],
        "responses": dict(sorted(responses.items())),
        "openapi_extensions": extra or None,
    }


def served() -> bytes:
    """The committed document, as the runtimes serve it."""
    return resources.files("arcs.http").joinpath(SPEC_FILE).read_bytes()
