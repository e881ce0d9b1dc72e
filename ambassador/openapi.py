"""The OpenAPI 3 document of everything the ambassador serves (`/api/v1/openapi.json`).

It is the contract schemathesis checks the server against (tests/ambassador/test_schema.py):
every documented response must conform, and no generated input may cause a 500.
"""

from __future__ import annotations

from .api import CONTINUE_PATTERN

STATUS_SCHEMA = {
    "type": "object",
    "required": ["kind", "apiVersion", "status", "code", "reason", "message"],
    "properties": {
        "kind": {"const": "Status"},
        "apiVersion": {"const": "v1"},
        "status": {"const": "Failure"},
        "code": {"type": "integer"},
        "reason": {"type": "string"},
        "message": {"type": "string"},
    },
}


def _error(description: str) -> dict:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Status"}}},
    }


def _json(description: str, ref: str) -> dict:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{ref}"}}},
    }


def openapi_document() -> dict:
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "workqueue source ambassador",
            "version": "v1",
            "description": "Lists work items (files on a shared volume) for a work-queue manager.",
        },
        "paths": {
            "/api/v1/items": {
                "get": {
                    "operationId": "listItems",
                    "summary": "List item names, sorted; page with limit/continue; or watch.",
                    "parameters": [
                        {
                            "name": "limit",
                            "in": "query",
                            "schema": {"type": "integer", "minimum": 1, "maximum": 100000},
                        },
                        {
                            "name": "continue",
                            "in": "query",
                            "schema": {"type": "string", "pattern": CONTINUE_PATTERN},
                        },
                        {"name": "watch", "in": "query", "schema": {"type": "boolean"}},
                        {
                            "name": "view",
                            "in": "query",
                            "description": "names (the default), or full: each item with its "
                            "data, as getItem gives it",
                            "schema": {"type": "string", "enum": ["names", "full"]},
                        },
                        {
                            "name": "timeoutSeconds",
                            "in": "query",
                            "schema": {"type": "integer", "minimum": 1, "maximum": 86400},
                        },
                    ],
                    "responses": {
                        "200": {
                            "description": (
                                "The list, or with watch=true a stream of events, one JSON "
                                "object per line; an empty line after 15 s without an event "
                                "is a heartbeat to skip."
                            ),
                            "content": {
                                "application/json": {
                                    "schema": {"$ref": "#/components/schemas/ItemList"}
                                },
                                "application/x-ndjson": {
                                    "schema": {"$ref": "#/components/schemas/WatchEvent"}
                                },
                            },
                        },
                        "400": _error("A query parameter is invalid."),
                        "405": _error("Only GET is served."),
                    },
                }
            },
            "/api/v1/items/{name}": {
                "get": {
                    "operationId": "getItem",
                    "summary": "One item's data.",
                    "parameters": [
                        {
                            "name": "name",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "string"},
                        },
                    ],
                    "responses": {
                        "200": _json("The item.", "Item"),
                        "404": _error("No such item."),
                        "405": _error("Only GET is served."),
                    },
                }
            },
            "/healthz": {
                "get": {
                    "operationId": "healthz",
                    "summary": "The process is up.",
                    "responses": {
                        "200": {
                            "description": "ok",
                            "content": {"text/plain": {"schema": {"type": "string"}}},
                        }
                    },
                }
            },
            "/readyz": {
                "get": {
                    "operationId": "readyz",
                    "summary": "The root folder is readable.",
                    "responses": {
                        "200": {
                            "description": "ready",
                            "content": {"text/plain": {"schema": {"type": "string"}}},
                        },
                        "503": _error("The root cannot be read."),
                    },
                }
            },
            "/metrics": {
                "get": {
                    "operationId": "metrics",
                    "summary": "Prometheus metrics.",
                    "responses": {
                        "200": {
                            "description": "text exposition format",
                            "content": {"text/plain": {"schema": {"type": "string"}}},
                        }
                    },
                }
            },
        },
        "components": {
            "schemas": {
                "Status": STATUS_SCHEMA,
                "ItemList": {
                    "type": "object",
                    "required": ["kind", "apiVersion", "items", "metadata"],
                    "properties": {
                        "kind": {"const": "ItemList"},
                        "apiVersion": {"const": "v1"},
                        "items": {
                            "type": "array",
                            "items": {
                                "oneOf": [
                                    {"type": "string"},
                                    {"$ref": "#/components/schemas/ItemWithData"},
                                ]
                            },
                        },
                        "metadata": {
                            "type": "object",
                            "properties": {
                                "resourceVersion": {
                                    "type": "string",
                                    "pattern": "^[0-9]+$",
                                    "description": "the listing's version: it only grows, "
                                    "whichever server process answers",
                                },
                                "continue": {"type": "string"},
                                "remainingItemCount": {"type": "integer", "minimum": 1},
                            },
                        },
                    },
                },
                "Item": {
                    "type": "object",
                    "required": ["kind", "apiVersion", "data"],
                    "properties": {
                        "kind": {"const": "Item"},
                        "apiVersion": {"const": "v1"},
                        "data": {"$ref": "#/components/schemas/ItemData"},
                    },
                },
                "ItemData": {
                    "type": "object",
                    "required": ["name", "path", "size", "modified", "contentType", "version"],
                    "properties": {
                        "name": {"type": "string"},
                        "path": {"type": "string"},
                        "size": {"type": "integer", "minimum": 0},
                        "modified": {"type": "string", "format": "date-time"},
                        "contentType": {"type": "string"},
                        "version": {
                            "type": "string",
                            "description": "changes when the file does: a digest of size and "
                            "mtime, or of the bytes (--version-by content)",
                        },
                    },
                },
                "ItemWithData": {
                    "type": "object",
                    "required": ["name", "data"],
                    "properties": {
                        "name": {"type": "string"},
                        "data": {"$ref": "#/components/schemas/ItemData"},
                    },
                },
                "WatchEvent": {
                    "type": "object",
                    "required": ["type", "item"],
                    "properties": {
                        "type": {"enum": ["ADDED", "DELETED"]},
                        "item": {"type": "string"},
                        "data": {"$ref": "#/components/schemas/ItemData"},
                    },
                },
            }
        },
    }
