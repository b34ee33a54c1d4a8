"""Tests for turnstore.domain.items.classify: one realistic item per type, odd shapes,
sanitising."""

from __future__ import annotations

import dataclasses
import json
import typing
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support import require_module
from turnstore.domain.items import ItemInfo, classify

PNG = "data:image/png;base64," + "iVBORw0KGgo" * 1000  # stands in for a large screenshot

# (item, expected) for every item type, shapes taken from openai.types.responses and from
# what openai-agents 0.24 persists (traced with ScriptedModel + SQLiteSession).
CASES: list[Any] = [
    # --- messages
    pytest.param(
        {"role": "user", "content": "What's the time?"},
        ItemInfo(type="message", kind="message", role="user", text="What's the time?"),
        id="user-typeless-str",
    ),
    pytest.param(
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "What is in"},
                {"type": "input_image", "detail": "auto", "image_url": PNG},
                {"type": "input_text", "text": "this picture?"},
            ],
        },
        ItemInfo(type="message", kind="message", role="user", text="What is in\nthis picture?"),
        id="user-typed-parts",
    ),
    pytest.param(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [
                {"type": "output_text", "text": "It is noon.", "annotations": [], "logprobs": []},
                {"type": "output_text", "text": "In Oslo.", "annotations": []},
            ],
        },
        ItemInfo(
            type="message",
            kind="message",
            role="assistant",
            text="It is noon.\nIn Oslo.",
            status="completed",
        ),
        id="assistant-output-text",
    ),
    pytest.param(
        {
            "id": "msg_2",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "refusal", "refusal": "I can't help with that."}],
        },
        ItemInfo(
            type="message",
            kind="message",
            role="assistant",
            text="I can't help with that.",
            status="completed",
        ),
        id="assistant-refusal",
    ),
    pytest.param(
        {"role": "system", "content": "Be brief."},
        ItemInfo(type="message", kind="message", role="system", text="Be brief."),
        id="system",
    ),
    pytest.param(
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "x"}]},
        ItemInfo(type="message", kind="message", role="developer", text="x"),
        id="developer",
    ),
    # --- other known non-tool items
    pytest.param(
        {
            "id": "rs_1",
            "type": "reasoning",
            "summary": [
                {"type": "summary_text", "text": "Look up the time."},
                {"type": "summary_text", "text": "Answer briefly."},
            ],
            "encrypted_content": "gAAAA...",
        },
        ItemInfo(type="reasoning", kind="other", text="Look up the time.\nAnswer briefly."),
        id="reasoning-summary",
    ),
    pytest.param(
        {
            "id": "rs_2",
            "type": "reasoning",
            "summary": [],
            "content": [{"type": "reasoning_text", "text": "step 1"}],
        },
        ItemInfo(type="reasoning", kind="other", text="step 1"),
        id="reasoning-content-only",
    ),
    pytest.param(
        {"id": "rs_3", "type": "reasoning", "summary": [], "encrypted_content": "gAAAA..."},
        ItemInfo(type="reasoning", kind="other"),
        id="reasoning-encrypted-only",
    ),
    pytest.param(
        {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAA..."},
        ItemInfo(type="compaction", kind="other"),
        id="compaction",
    ),
    pytest.param(
        {"type": "compaction_trigger"},
        ItemInfo(type="compaction_trigger", kind="other"),
        id="compaction-trigger",
    ),
    pytest.param(
        {"type": "item_reference", "id": "msg_1"},
        ItemInfo(type="item_reference", kind="other"),
        id="item-reference",
    ),
    pytest.param(
        {
            "type": "additional_tools",
            "role": "developer",
            "tools": [{"type": "function", "name": "f", "parameters": {}, "strict": True}],
        },
        ItemInfo(type="additional_tools", kind="other"),
        id="additional-tools-role-is-not-a-message",
    ),
    pytest.param(
        {"type": "configuration_update", "reasoning": {"effort": "low"}},
        ItemInfo(type="configuration_update", kind="other"),
        id="configuration-update",
    ),
    # --- function tools and handoffs (exact SDK shapes)
    pytest.param(
        {
            "arguments": '{"city":"Oslo"}',
            "call_id": "call_1",
            "name": "get_time",
            "type": "function_call",
            "id": "call_1",
        },
        ItemInfo(
            type="function_call",
            kind="tool_call",
            call_id="call_1",
            name="get_time",
            tool_kind="function",
            text='{"city":"Oslo"}',
            arguments='{"city":"Oslo"}',
        ),
        id="function-call",
    ),
    pytest.param(
        {"call_id": "call_1", "output": "12:00 in Oslo", "type": "function_call_output"},
        ItemInfo(
            type="function_call_output",
            kind="tool_output",
            call_id="call_1",
            tool_kind="function",
            text="12:00 in Oslo",
            output="12:00 in Oslo",
        ),
        id="function-output-str",
    ),
    pytest.param(
        {
            "type": "function_call_output",
            "call_id": "call_2",
            "name": "chart",
            "status": "completed",
            "output": [
                {"type": "input_text", "text": "Sales by month:"},
                {"type": "input_image", "detail": "auto", "image_url": PNG},
            ],
        },
        ItemInfo(
            type="function_call_output",
            kind="tool_output",
            call_id="call_2",
            name="chart",
            tool_kind="function",
            text="Sales by month:\n<image>",
            output="Sales by month:\n<image>",
            status="completed",
        ),
        id="function-output-parts",
    ),
    pytest.param(
        {
            "type": "function_call_output",
            "call_id": "call_3",
            "output": [{"type": "input_image", "detail": "auto", "image_url": PNG}],
        },
        ItemInfo(
            type="function_call_output",
            kind="tool_output",
            call_id="call_3",
            tool_kind="function",
            output="<image>",
        ),
        id="function-output-image-only",
    ),
    pytest.param(
        {
            "type": "function_call_output",
            "call_id": "call_4",
            "output": [{"type": "input_file", "file_id": "file_1", "filename": "a.pdf"}],
            "status": "incomplete",
        },
        ItemInfo(
            type="function_call_output",
            kind="tool_output",
            call_id="call_4",
            tool_kind="function",
            output="<file>",
            status="incomplete",
            error="<file>",
        ),
        id="function-output-file-incomplete",
    ),
    pytest.param(
        {
            "arguments": "{}",
            "call_id": "call_h",
            "name": "transfer_to_billing",
            "type": "function_call",
            "id": "call_h",
        },
        ItemInfo(
            type="function_call",
            kind="tool_call",
            call_id="call_h",
            name="transfer_to_billing",
            tool_kind="handoff",
            text="{}",
            arguments="{}",
        ),
        id="handoff-call",
    ),
    pytest.param(
        {"call_id": "call_h", "output": '{"assistant": "Billing"}', "type": "function_call_output"},
        ItemInfo(
            type="function_call_output",
            kind="tool_output",
            call_id="call_h",
            tool_kind="function",
            text='{"assistant": "Billing"}',
            output='{"assistant": "Billing"}',
        ),
        id="handoff-output-is-function",
    ),
    # --- custom tools
    pytest.param(
        {"type": "custom_tool_call", "call_id": "call_c", "name": "sql", "input": "SELECT 1"},
        ItemInfo(
            type="custom_tool_call",
            kind="tool_call",
            call_id="call_c",
            name="sql",
            tool_kind="custom",
            text="SELECT 1",
            arguments="SELECT 1",
        ),
        id="custom-call",
    ),
    pytest.param(
        {
            "type": "custom_tool_call_output",
            "call_id": "call_c",
            "output": [{"type": "input_text", "text": "1"}],
        },
        ItemInfo(
            type="custom_tool_call_output",
            kind="tool_output",
            call_id="call_c",
            tool_kind="custom",
            text="1",
            output="1",
        ),
        id="custom-output-parts",
    ),
    # --- computer use
    pytest.param(
        {
            "type": "computer_call",
            "id": "cu_1",
            "call_id": "call_cu",
            "action": {"type": "click", "button": "left", "x": 10, "y": 20},
            "pending_safety_checks": [],
            "status": "completed",
        },
        ItemInfo(
            type="computer_call",
            kind="tool_call",
            call_id="call_cu",
            name="computer",
            tool_kind="computer",
            text='{"type": "click", "button": "left", "x": 10, "y": 20}',
            arguments='{"type": "click", "button": "left", "x": 10, "y": 20}',
            status="completed",
        ),
        id="computer-call-action",
    ),
    pytest.param(
        {
            "type": "computer_call",
            "id": "cu_2",
            "call_id": "call_cu2",
            "actions": [{"type": "type", "text": "héllo"}, {"type": "wait"}],
            "pending_safety_checks": [],
            "status": "completed",
        },
        ItemInfo(
            type="computer_call",
            kind="tool_call",
            call_id="call_cu2",
            name="computer",
            tool_kind="computer",
            text='[{"type": "type", "text": "héllo"}, {"type": "wait"}]',
            arguments='[{"type": "type", "text": "héllo"}, {"type": "wait"}]',
            status="completed",
        ),
        id="computer-call-actions-batch",
    ),
    pytest.param(
        {
            "type": "computer_call_output",
            "call_id": "call_cu",
            "output": {"type": "computer_screenshot", "image_url": PNG},
        },
        ItemInfo(
            type="computer_call_output",
            kind="tool_output",
            call_id="call_cu",
            name="computer",
            tool_kind="computer",
            output="<image>",
        ),
        id="computer-output-screenshot",
    ),
    # --- local shell: the API keys the output by "id", the SDK writes "call_id"
    pytest.param(
        {
            "type": "local_shell_call",
            "id": "lsh_1",
            "call_id": "call_ls",
            "action": {"type": "exec", "command": ["ls", "-la"], "env": {}},
            "status": "completed",
        },
        ItemInfo(
            type="local_shell_call",
            kind="tool_call",
            call_id="call_ls",
            name="local_shell",
            tool_kind="local_shell",
            text='{"type": "exec", "command": ["ls", "-la"], "env": {}}',
            arguments='{"type": "exec", "command": ["ls", "-la"], "env": {}}',
            status="completed",
        ),
        id="local-shell-call",
    ),
    pytest.param(
        {"type": "local_shell_call_output", "id": "call_ls", "output": "total 0"},
        ItemInfo(
            type="local_shell_call_output",
            kind="tool_output",
            call_id="call_ls",
            name="local_shell",
            tool_kind="local_shell",
            text="total 0",
            output="total 0",
        ),
        id="local-shell-output-api-shape",
    ),
    pytest.param(
        {"type": "local_shell_call_output", "call_id": "call_ls", "output": "total 0"},
        ItemInfo(
            type="local_shell_call_output",
            kind="tool_output",
            call_id="call_ls",
            name="local_shell",
            tool_kind="local_shell",
            text="total 0",
            output="total 0",
        ),
        id="local-shell-output-sdk-shape",
    ),
    # --- shell
    pytest.param(
        {
            "type": "shell_call",
            "call_id": "call_sh",
            "action": {"commands": ["echo hi"], "timeout_ms": 1000},
            "status": "completed",
        },
        ItemInfo(
            type="shell_call",
            kind="tool_call",
            call_id="call_sh",
            name="shell",
            tool_kind="shell",
            text='{"commands": ["echo hi"], "timeout_ms": 1000}',
            arguments='{"commands": ["echo hi"], "timeout_ms": 1000}',
            status="completed",
        ),
        id="shell-call",
    ),
    pytest.param(
        {
            "type": "shell_call_output",
            "call_id": "call_sh",
            "output": [
                {"stdout": "hi\n", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}
            ],
            "status": "completed",
        },
        ItemInfo(
            type="shell_call_output",
            kind="tool_output",
            call_id="call_sh",
            name="shell",
            tool_kind="shell",
            text="hi\n",
            output="hi\n",
            status="completed",
        ),
        id="shell-output",
    ),
    pytest.param(
        {
            "type": "shell_call_output",
            "call_id": "call_sh2",
            "output": [
                {"stdout": "", "stderr": "boom", "outcome": {"type": "exit", "exit_code": 1}}
            ],
            "status": "failed",
        },
        ItemInfo(
            type="shell_call_output",
            kind="tool_output",
            call_id="call_sh2",
            name="shell",
            tool_kind="shell",
            text="boom",
            output="boom",
            status="failed",
            error="boom",
        ),
        id="shell-output-failed",
    ),
    # --- apply_patch
    pytest.param(
        {
            "type": "apply_patch_call",
            "call_id": "call_ap",
            "operation": {"type": "update_file", "path": "a.py", "diff": "@@ -1 +1 @@\n-a\n+b"},
            "status": "completed",
        },
        ItemInfo(
            type="apply_patch_call",
            kind="tool_call",
            call_id="call_ap",
            name="apply_patch",
            tool_kind="apply_patch",
            text='{"type": "update_file", "path": "a.py", "diff": "@@ -1 +1 @@\\n-a\\n+b"}',
            arguments='{"type": "update_file", "path": "a.py", "diff": "@@ -1 +1 @@\\n-a\\n+b"}',
            status="completed",
        ),
        id="apply-patch-call",
    ),
    pytest.param(
        {
            "type": "apply_patch_call_output",
            "call_id": "call_ap",
            "status": "failed",
            "output": "hunk 1 did not apply",
        },
        ItemInfo(
            type="apply_patch_call_output",
            kind="tool_output",
            call_id="call_ap",
            name="apply_patch",
            tool_kind="apply_patch",
            text="hunk 1 did not apply",
            output="hunk 1 did not apply",
            status="failed",
            error="hunk 1 did not apply",
        ),
        id="apply-patch-output-failed",
    ),
    # --- tool search: a call/output pair, not one hosted item
    pytest.param(
        {
            "type": "tool_search_call",
            "call_id": "call_ts",
            "arguments": {"query": "weather"},
            "execution": "client",
            "status": "completed",
        },
        ItemInfo(
            type="tool_search_call",
            kind="tool_call",
            call_id="call_ts",
            name="tool_search",
            tool_kind="tool_search",
            text='{"query": "weather"}',
            arguments='{"query": "weather"}',
            status="completed",
        ),
        id="tool-search-call",
    ),
    pytest.param(
        {
            "type": "tool_search_call",
            "id": "ts_1",
            "call_id": None,
            "arguments": {"query": "weather"},
            "execution": "server",
            "status": "completed",
        },
        ItemInfo(
            type="tool_search_call",
            kind="tool_call",
            name="tool_search",
            tool_kind="tool_search",
            text='{"query": "weather"}',
            arguments='{"query": "weather"}',
            status="completed",
        ),
        id="tool-search-call-anonymous",
    ),
    pytest.param(
        {
            "type": "tool_search_output",
            "call_id": "call_ts",
            "execution": "client",
            "status": "completed",
            "tools": [
                {"type": "function", "name": "get_weather", "parameters": {}, "strict": True},
                {"type": "mcp", "server_label": "deepwiki"},
                {"type": "local_shell"},
            ],
        },
        ItemInfo(
            type="tool_search_output",
            kind="tool_output",
            call_id="call_ts",
            name="tool_search",
            tool_kind="tool_search",
            text="get_weather\ndeepwiki\nlocal_shell",
            output="get_weather\ndeepwiki\nlocal_shell",
            status="completed",
        ),
        id="tool-search-output",
    ),
    # --- programmatic tool calling
    pytest.param(
        {
            "type": "program",
            "id": "prg_1",
            "call_id": "call_p",
            "code": "return 1 + 1;",
            "fingerprint": "fp",
        },
        ItemInfo(
            type="program",
            kind="tool_call",
            call_id="call_p",
            name="program",
            tool_kind="program",
            text="return 1 + 1;",
            arguments="return 1 + 1;",
        ),
        id="program",
    ),
    pytest.param(
        {
            "type": "program_output",
            "id": "prgo_1",
            "call_id": "call_p",
            "result": "2",
            "status": "completed",
        },
        ItemInfo(
            type="program_output",
            kind="tool_output",
            call_id="call_p",
            name="program",
            tool_kind="program",
            text="2",
            output="2",
            status="completed",
        ),
        id="program-output",
    ),
    # --- MCP
    pytest.param(
        {
            "type": "mcp_approval_request",
            "id": "mcpr_1",
            "name": "create_issue",
            "arguments": '{"title":"Bug"}',
            "server_label": "github",
        },
        ItemInfo(
            type="mcp_approval_request",
            kind="tool_call",
            call_id="mcpr_1",
            name="create_issue",
            tool_kind="mcp_approval",
            text='{"title":"Bug"}',
            arguments='{"title":"Bug"}',
        ),
        id="mcp-approval-request",
    ),
    pytest.param(
        {
            "type": "mcp_approval_response",
            "approval_request_id": "mcpr_1",
            "approve": False,
            "reason": "not now",
        },
        ItemInfo(
            type="mcp_approval_response",
            kind="tool_output",
            call_id="mcpr_1",
            tool_kind="mcp_approval",
            text="rejected: not now",
            output="rejected: not now",
        ),
        id="mcp-approval-response-rejected",
    ),
    pytest.param(
        {"type": "mcp_approval_response", "approval_request_id": "mcpr_2", "approve": True},
        ItemInfo(
            type="mcp_approval_response",
            kind="tool_output",
            call_id="mcpr_2",
            tool_kind="mcp_approval",
            text="approved",
            output="approved",
        ),
        id="mcp-approval-response-approved",
    ),
    pytest.param(
        {
            "type": "mcp_call",
            "id": "mcp_1",
            "name": "ask_question",
            "arguments": '{"q":"What is X?"}',
            "server_label": "deepwiki",
            "output": "X is Y.",
            "status": "completed",
        },
        ItemInfo(
            type="mcp_call",
            kind="hosted_tool",
            call_id="mcp_1",
            name="ask_question",
            tool_kind="mcp",
            text='{"q":"What is X?"}\nX is Y.',
            arguments='{"q":"What is X?"}',
            output="X is Y.",
            status="completed",
        ),
        id="mcp-call",
    ),
    pytest.param(
        {
            "type": "mcp_call",
            "id": "mcp_2",
            "name": "ask_question",
            "arguments": "{}",
            "server_label": "deepwiki",
            "error": {"type": "http_error", "code": 502, "message": "Bad gateway"},
            "status": "failed",
        },
        ItemInfo(
            type="mcp_call",
            kind="hosted_tool",
            call_id="mcp_2",
            name="ask_question",
            tool_kind="mcp",
            text="{}",
            arguments="{}",
            status="failed",
            error='{"type": "http_error", "code": 502, "message": "Bad gateway"}',
        ),
        id="mcp-call-error-object",
    ),
    pytest.param(
        {
            "type": "mcp_call",
            "id": "mcp_3",
            "name": "t",
            "arguments": "{}",
            "server_label": "s",
            "error": "timeout",
        },
        ItemInfo(
            type="mcp_call",
            kind="hosted_tool",
            call_id="mcp_3",
            name="t",
            tool_kind="mcp",
            text="{}",
            arguments="{}",
            error="timeout",
        ),
        id="mcp-call-error-str",
    ),
    pytest.param(
        {
            "type": "mcp_list_tools",
            "id": "mcpl_1",
            "server_label": "deepwiki",
            "tools": [
                {"name": "ask_question", "input_schema": {}},
                {"name": "read_wiki", "input_schema": {}},
            ],
        },
        ItemInfo(
            type="mcp_list_tools",
            kind="hosted_tool",
            call_id="mcpl_1",
            name="mcp_list_tools",
            tool_kind="mcp_list_tools",
            text="ask_question\nread_wiki",
            output="ask_question\nread_wiki",
        ),
        id="mcp-list-tools",
    ),
    pytest.param(
        {
            "type": "mcp_list_tools",
            "id": "mcpl_2",
            "server_label": "down",
            "tools": [],
            "error": "connection refused",
        },
        ItemInfo(
            type="mcp_list_tools",
            kind="hosted_tool",
            call_id="mcpl_2",
            name="mcp_list_tools",
            tool_kind="mcp_list_tools",
            error="connection refused",
        ),
        id="mcp-list-tools-error",
    ),
    # --- hosted tools
    pytest.param(
        {
            "type": "web_search_call",
            "id": "ws_1",
            "status": "completed",
            "action": {"type": "search", "query": "weather oslo"},
        },
        ItemInfo(
            type="web_search_call",
            kind="hosted_tool",
            call_id="ws_1",
            name="web_search",
            tool_kind="web_search",
            text='{"type": "search", "query": "weather oslo"}',
            arguments='{"type": "search", "query": "weather oslo"}',
            status="completed",
        ),
        id="web-search",
    ),
    pytest.param(
        {
            "type": "file_search_call",
            "id": "fs_1",
            "queries": ["refund policy"],
            "status": "completed",
            "results": [{"file_id": "file_1", "score": 0.9, "text": "Refunds within 30 days."}],
        },
        ItemInfo(
            type="file_search_call",
            kind="hosted_tool",
            call_id="fs_1",
            name="file_search",
            tool_kind="file_search",
            text='["refund policy"]\n'
            '[{"file_id": "file_1", "score": 0.9, "text": "Refunds within 30 days."}]',
            arguments='["refund policy"]',
            output='[{"file_id": "file_1", "score": 0.9, "text": "Refunds within 30 days."}]',
            status="completed",
        ),
        id="file-search",
    ),
    pytest.param(
        {
            "type": "code_interpreter_call",
            "id": "ci_1",
            "code": "print(2 + 2)",
            "container_id": "cntr_1",
            "outputs": [{"type": "logs", "logs": "4\n"}],
            "status": "completed",
        },
        ItemInfo(
            type="code_interpreter_call",
            kind="hosted_tool",
            call_id="ci_1",
            name="code_interpreter",
            tool_kind="code_interpreter",
            text='print(2 + 2)\n[{"type": "logs", "logs": "4\\n"}]',
            arguments="print(2 + 2)",
            output='[{"type": "logs", "logs": "4\\n"}]',
            status="completed",
        ),
        id="code-interpreter",
    ),
    pytest.param(
        {
            "type": "code_interpreter_call",
            "id": "ci_2",
            "code": None,
            "container_id": "cntr_1",
            "outputs": None,
            "status": "failed",
        },
        ItemInfo(
            type="code_interpreter_call",
            kind="hosted_tool",
            call_id="ci_2",
            name="code_interpreter",
            tool_kind="code_interpreter",
            status="failed",
        ),
        id="code-interpreter-failed-empty",
    ),
    pytest.param(
        {
            "type": "image_generation_call",
            "id": "ig_1",
            "status": "completed",
            "result": PNG,
            "revised_prompt": "A red fox in snow",
            "output_format": "png",
        },
        ItemInfo(
            type="image_generation_call",
            kind="hosted_tool",
            call_id="ig_1",
            name="image_generation",
            tool_kind="image_generation",
            text="A red fox in snow",
            arguments="A red fox in snow",
            output="<image>",
            status="completed",
        ),
        id="image-generation",
    ),
    pytest.param(
        {
            "type": "image_generation_call",
            "id": "ig_2",
            "status": "failed",
            "result": None,
            "error": {"code": None, "message": "blocked", "param": None, "type": "moderation"},
        },
        ItemInfo(
            type="image_generation_call",
            kind="hosted_tool",
            call_id="ig_2",
            name="image_generation",
            tool_kind="image_generation",
            status="failed",
            error='{"code": null, "message": "blocked", "param": null, "type": "moderation"}',
        ),
        id="image-generation-failed",
    ),
    # --- unknown and malformed
    pytest.param(
        {"type": "hosted_tool_call", "call_id": "x", "status": "completed", "name": "n"},
        ItemInfo(type="hosted_tool_call", kind="unknown", status="completed"),
        id="unknown-type",
    ),
    pytest.param({}, ItemInfo(type="unknown", kind="unknown"), id="empty"),
    pytest.param(
        {"type": 7, "role": "user", "content": "hi"},
        ItemInfo(type="unknown", kind="unknown"),
        id="non-str-type-is-not-typeless",
    ),
    pytest.param(
        {"type": None, "role": "user", "content": "hi"},
        ItemInfo(type="message", kind="message", role="user", text="hi"),
        id="none-type-with-role",
    ),
    pytest.param(
        {"id": "msg_1"},
        ItemInfo(type="unknown", kind="unknown"),
        id="typeless-without-role",
    ),
    pytest.param(
        {"role": 5, "content": 5, "status": 5},
        ItemInfo(type="message", kind="message"),
        id="message-wrong-value-types",
    ),
    pytest.param(
        {"type": "message", "role": "user", "content": [5, None, {"text": 3}, {"type": "x"}, ""]},
        ItemInfo(type="message", kind="message", role="user"),
        id="message-junk-parts",
    ),
    pytest.param(
        {"type": "message", "role": "user", "content": ""},
        ItemInfo(type="message", kind="message", role="user"),
        id="message-empty-content",
    ),
    pytest.param(
        {"type": "function_call", "call_id": ["c"], "name": 5, "arguments": None},
        ItemInfo(type="function_call", kind="tool_call", tool_kind="function"),
        id="function-call-wrong-value-types",
    ),
    pytest.param(
        {"type": "function_call_output", "call_id": "c", "output": {"ok": True, "n": 2}},
        ItemInfo(
            type="function_call_output",
            kind="tool_output",
            call_id="c",
            tool_kind="function",
            text='{"ok": true, "n": 2}',
            output='{"ok": true, "n": 2}',
        ),
        id="function-output-dict-is-json",
    ),
    pytest.param(
        {"type": "reasoning", "summary": "not a list", "content": 3},
        ItemInfo(type="reasoning", kind="other"),
        id="reasoning-wrong-types",
    ),
    pytest.param(
        {"type": "mcp_list_tools", "tools": "x", "id": 3},
        ItemInfo(
            type="mcp_list_tools",
            kind="hosted_tool",
            name="mcp_list_tools",
            tool_kind="mcp_list_tools",
        ),
        id="mcp-list-tools-wrong-types",
    ),
    pytest.param(
        {"type": "mcp_approval_response", "approval_request_id": "r", "approve": "yes"},
        ItemInfo(
            type="mcp_approval_response",
            kind="tool_output",
            call_id="r",
            tool_kind="mcp_approval",
        ),
        id="mcp-approval-response-non-bool",
    ),
]


@pytest.mark.parametrize(("item", "expected"), CASES)
def test_classify(item: dict[str, Any], expected: ItemInfo) -> None:
    before = json.dumps(item, sort_keys=True)
    assert classify(item) == expected
    assert json.dumps(item, sort_keys=True) == before  # classify never mutates the item


def test_every_openai_input_item_type_is_known() -> None:
    """A new item type in the openai package shows up here, not as silent 'unknown' rows."""
    from openai.types.responses.response_input_item_param import ResponseInputItemParam

    types: set[str] = set()
    for cls in typing.get_args(ResponseInputItemParam):
        annotation = typing.get_type_hints(cls)["type"]
        types.update(a for a in typing.get_args(annotation) if isinstance(a, str))
    assert len(types) > 25
    unknown = sorted(t for t in types if classify({"type": t}).kind == "unknown")
    assert unknown == []


@pytest.mark.parametrize(
    ("item", "starts"),
    [
        ({"role": "user", "content": "hi"}, True),
        ({"type": "message", "role": "user", "content": []}, True),
        ({"type": "message", "role": "assistant", "content": []}, False),
        ({"role": "system", "content": "x"}, False),
        ({"type": "function_call_output", "call_id": "c", "output": "x"}, False),
        ({"type": "additional_tools", "role": "user"}, False),
    ],
)
def test_starts_run(item: dict[str, Any], starts: bool) -> None:
    assert classify(item).starts_run is starts


def test_accepts_any_mapping() -> None:
    info = classify(MappingProxyType({"role": "user", "content": "hi"}))
    assert info == ItemInfo(type="message", kind="message", role="user", text="hi")


# --- sanitising: NUL and lone surrogates must become U+FFFD in every extracted string


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("a\x00b", "a\ufffdb"),
        ("caf\u00e9\x00", "caf\u00e9\ufffd"),
        ("x\ud800y\udfffz", "x\ufffdy\ufffdz"),
        ("\ud83d", "\ufffd"),
        ("emoji \U0001f600 ok", "emoji \U0001f600 ok"),
    ],
)
def test_sanitises_message_text(raw: str, clean: str) -> None:
    assert classify({"role": "user", "content": raw}).text == clean


def test_sanitises_every_field() -> None:
    bad = "v\x00\ud800"
    info = classify(
        {
            "type": "mcp_call",
            "id": bad,
            "name": bad,
            "arguments": {"k": bad},
            "output": bad,
            "status": bad,
            "error": bad,
        }
    )
    assert info.call_id == info.name == info.output == info.status == info.error == "v\ufffd\ufffd"
    assert info.arguments == '{"k": "v\\u0000\ufffd"}'  # json escapes NUL itself
    assert info.text == '{"k": "v\\u0000\ufffd"}\nv\ufffd\ufffd'
    assert classify({"type": "new\x00type"}).type == "new\ufffdtype"
    assert classify({"role": bad, "content": [{"type": "input_text", "text": bad}]}) == ItemInfo(
        type="message", kind="message", role="v\ufffd\ufffd", text="v\ufffd\ufffd"
    )


def test_clean_strings_are_not_copied() -> None:
    # The hot path: clean text (ASCII or not) passes through without a copy.
    for text in ("plain ascii " * 100, "ünïcödé " * 100):
        assert classify({"role": "user", "content": text}).text is text


def test_unserialisable_values_do_not_raise() -> None:
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    info = classify({"type": "computer_call", "call_id": "c", "action": cyclic})
    assert info.arguments is None
    assert info.call_id == "c"
    odd = classify({"type": "web_search_call", "id": "w", "action": {"raw": b"\x00"}})
    assert odd.arguments == '{"raw": "b\'\\\\x00\'"}'  # non-JSON values are stringified
    tuple_keys = classify({"type": "shell_call", "call_id": "s", "action": {(1, 2): "x"}})
    assert tuple_keys.arguments is None


# --- property: never raises, and every string it returns is storable

_FIELDS = (
    *("type", "role", "content", "call_id", "id", "name", "arguments", "input", "output"),
    *("action", "actions", "operation", "status", "error", "tools", "summary", "result"),
    *("approval_request_id", "approve", "reason", "code", "outputs", "queries"),
)
_TYPES = sorted(
    {
        "message",
        "reasoning",
        "compaction",
        "item_reference",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "computer_call",
        "computer_call_output",
        "local_shell_call",
        "local_shell_call_output",
        "shell_call",
        "shell_call_output",
        "apply_patch_call",
        "apply_patch_call_output",
        "tool_search_call",
        "tool_search_output",
        "program",
        "program_output",
        "mcp_approval_request",
        "mcp_approval_response",
        "mcp_call",
        "mcp_list_tools",
        "web_search_call",
        "file_search_call",
        "code_interpreter_call",
        "image_generation_call",
    }
)
_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text()
_json = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(_FIELDS) | st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=20,
)


def _assert_storable(info: ItemInfo) -> None:
    for field in dataclasses.fields(info):
        value = getattr(info, field.name)
        assert value is None or isinstance(value, str)
        if isinstance(value, str):
            assert "\x00" not in value
            value.encode("utf-8")  # raises on a lone surrogate


@settings(max_examples=400)
@given(
    st.dictionaries(st.sampled_from(_FIELDS) | st.text(max_size=5), _json, max_size=8),
    st.sampled_from([*_TYPES, None, 7, "", "unknown_thing\x00"]),
)
def test_never_raises(item: dict[str, Any], item_type: object) -> None:
    if item_type is not None:
        item["type"] = item_type
    info = classify(item)
    assert info.kind in {"message", "tool_call", "tool_output", "hosted_tool", "other", "unknown"}
    _assert_storable(info)


# --- end to end: classify what the Agents SDK actually persists


@pytest.mark.e2e
async def test_sdk_persisted_items() -> None:
    require_module("agents")
    from agents import Agent, RunConfig, Runner, SQLiteSession, function_tool
    from agents.testing import ScriptedModel, assistant_message, function_call

    @function_tool
    def get_time(city: str) -> str:
        """Tell the time."""
        return f"12:00 in {city}"

    billing = Agent(name="Billing", model=ScriptedModel([[assistant_message("Billing here.")]]))
    model = ScriptedModel(
        [
            [function_call("get_time", {"city": "Oslo"}, call_id="call_1")],
            [function_call("transfer_to_billing", {}, call_id="call_2")],
        ]
    )
    agent = Agent(name="Main", model=model, tools=[get_time], handoffs=[billing])
    session = SQLiteSession("s")
    try:
        config = RunConfig(tracing_disabled=True)
        await Runner.run(agent, "time?", session=session, run_config=config)
        infos = [classify(item) for item in await session.get_items()]
    finally:
        session.close()

    assert [(i.kind, i.tool_kind, i.call_id, i.name) for i in infos] == [
        ("message", None, None, None),
        ("tool_call", "function", "call_1", "get_time"),
        ("tool_output", "function", "call_1", None),
        ("tool_call", "handoff", "call_2", "transfer_to_billing"),
        ("tool_output", "function", "call_2", None),
        ("message", None, None, None),
    ]
    assert infos[0].starts_run
    assert infos[0].text == "time?"
    assert infos[2].output == "12:00 in Oslo"
    assert (infos[-1].role, infos[-1].text) == ("assistant", "Billing here.")
