"""Which AWS services the functions' code makes boto3 clients for, read from the source.

The deps layer keeps botocore's models of these services only (the other ~440 are 25 MB nobody
loads), so the list must follow the code: a client for a service whose model was trimmed fails
at run time with ``UnknownServiceError``. The scan finds every ``.client(...)`` and
``.resource(...)`` call. Its service is a string literal, or a parameter of an enclosing function
(``def lazy(service, ...)``), in which case the literals that function is called with count. A
service named any other way cannot be read, and :func:`boto3_services` says where.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

_FACTORY_METHODS = frozenset({"client", "resource"})


class UnreadableService(Exception):
    """A client is made for a service the scan cannot name (not a literal, nor a forwarded parameter)."""


@dataclass(frozen=True)
class _Forwarder:
    """A function that passes its parameter ``index`` (or keyword ``name``) on as the service."""

    index: int
    name: str


def _service_argument(call: ast.Call) -> ast.expr | None:
    if call.args:
        return call.args[0]
    return next((k.value for k in call.keywords if k.arg == "service_name"), None)


def _is_client_call(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _FACTORY_METHODS
        # boto3.client / session.client / boto3.resource ...; not e.g. ``httpx.Client``.
        and _service_argument(node) is not None
    )


def _scan(tree: ast.Module, where: str) -> tuple[set[str], dict[str, _Forwarder], list[tuple[str, ast.Call]]]:
    services: set[str] = set()
    forwarders: dict[str, _Forwarder] = {}
    unresolved: list[tuple[str, ast.Call]] = []
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    forwarded: set[int] = set()
    for function in functions:
        params = [a.arg for a in function.args.posonlyargs + function.args.args]
        for node in ast.walk(function):
            if not _is_client_call(node):
                continue
            assert isinstance(node, ast.Call)
            argument = _service_argument(node)
            if isinstance(argument, ast.Name) and argument.id in params:
                forwarders[function.name] = _Forwarder(params.index(argument.id), argument.id)
                forwarded.add(id(node))
    for node in ast.walk(tree):
        if not _is_client_call(node) or id(node) in forwarded:
            continue
        assert isinstance(node, ast.Call)
        argument = _service_argument(node)
        if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
            services.add(argument.value)
        else:
            unresolved.append((f"{where}:{node.lineno}", node))
    return services, forwarders, unresolved


def _forwarded_services(tree: ast.Module, forwarders: dict[str, _Forwarder], where: str) -> set[str]:
    services: set[str] = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in forwarders):
            continue
        forwarder = forwarders[node.func.id]
        argument = node.args[forwarder.index] if len(node.args) > forwarder.index else None
        argument = argument or next((k.value for k in node.keywords if k.arg == forwarder.name), None)
        if not (isinstance(argument, ast.Constant) and isinstance(argument.value, str)):
            raise UnreadableService(f"{where}:{node.lineno}: {node.func.id}() is not given a service name literal")
        services.add(argument.value)
    return services


def boto3_services(roots: Iterable[Path]) -> frozenset[str]:
    """Every service the Python files under ``roots`` make a boto3 client or resource for."""
    services: set[str] = set()
    unreadable: list[str] = []
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            found, forwarders, unresolved = _scan(tree, str(path))
            services |= found | _forwarded_services(tree, forwarders, str(path))
            unreadable += [where for where, _ in unresolved]
    if unreadable:
        raise UnreadableService(f"a client's service is not a literal at {', '.join(unreadable)}")
    return frozenset(services)
