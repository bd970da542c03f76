"""The span attribute names (and the operation values they take) that the mapping reads and our tracer writes.

Three vocabularies: the OpenTelemetry GenAI semantic conventions
(`gen_ai.*`), OpenInference (`openinference.span.kind`, `input.value`,
`llm.*`, `tool.*`, `graph.node.*`) and faultlens's own (`faultlens.*`), which
carry what neither has (step kind, cost, lessons, media, and on export every
field a `Trace` needs to come back exactly). A framework's own attributes are
in its adapter (`spans.adapters`), not here.
"""

from __future__ import annotations

# -- OpenTelemetry GenAI --------------------------------------------------------
OPERATION = "gen_ai.operation.name"
AGENT_NAME = "gen_ai.agent.name"
AGENT_DESCRIPTION = "gen_ai.agent.description"
CONVERSATION_ID = "gen_ai.conversation.id"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
PROVIDER = "gen_ai.provider.name"

# -- faultlens --------------------------------------------------------------------
STEP_KIND = "faultlens.step.kind"
STEP_ROLE = "faultlens.step.role"
COST_USD = "faultlens.cost_usd"
LESSONS = "faultlens.lessons"
MEDIA = "faultlens.media"
CONTENT = "faultlens.content"
STEP_METADATA = "faultlens.metadata"
NATIVE_ID = "faultlens.native_id"
STEP_INDEX = "faultlens.step.index"
SPAN_STARTED_AT = "faultlens.span_started_at"
# Markers trace_to_otlp writes when a step had no real span id / clock, so the
# importer can give back None instead of the synthetic value.
ORIGINAL_SPAN_ID = "faultlens.span_id"
ORIGINAL_PARENT_ID = "faultlens.parent_span_id"
NO_START = "faultlens.no_start"
NO_END = "faultlens.no_end"
# Trace header, on the workflow span.
TRACE_TASK = "faultlens.task"
TRACE_AGENTS = "faultlens.agents"
TRACE_OUTCOME = "faultlens.outcome"
TRACE_SOURCE = "faultlens.source"
TRACE_GOLD = "faultlens.gold"
TRACE_METADATA = "faultlens.trace.metadata"
SCHEMA_VERSION_ATTR = "faultlens.schema_version"

# -- OpenInference ----------------------------------------------------------------
OI_KIND = "openinference.span.kind"
OI_SESSION = "session.id"
OI_AGENT_NAME = "agent.name"
OI_GRAPH_NODE_NAME = "graph.node.name"
OI_GRAPH_NODE_ID = "graph.node.id"
OI_INPUT_VALUE = "input.value"
OI_OUTPUT_VALUE = "output.value"
OI_OUTPUT_MIME_TYPE = "output.mime_type"
OI_TOOL_NAME = "tool.name"
OI_TOOL_PARAMETERS = "tool.parameters"
OI_MODEL_NAME = "llm.model_name"
OI_PROMPT_TOKENS = "llm.token_count.prompt"
OI_COMPLETION_TOKENS = "llm.token_count.completion"
OI_INPUT_MESSAGES = "llm.input_messages"
OI_OUTPUT_MESSAGES = "llm.output_messages"
# OpenLLMetry's flattened messages (`gen_ai.prompt.N.role`, `gen_ai.completion.N.content`).
OPENLLMETRY_PROMPT = "gen_ai.prompt"
OPENLLMETRY_COMPLETION = "gen_ai.completion"

# -- operations: what a span does -------------------------------------------------
WORKFLOW, AGENT, CHAT, TOOL, STEP, CHAIN = "invoke_workflow", "invoke_agent", "chat", "execute_tool", "step", "chain"

# gen_ai.operation.name -> operation (None: a span that is no action of an agent).
OPERATION_ALIASES = {
    "invoke_workflow": WORKFLOW,
    "invoke_agent": AGENT,
    "create_agent": None,
    "chat": CHAT,
    "text_completion": CHAT,
    "generate_content": CHAT,
    "execute_tool": TOOL,
    "embeddings": None,
}
# openinference.span.kind (upper case) -> operation.
OPENINFERENCE_KINDS = {"LLM": CHAT, "TOOL": TOOL, "AGENT": AGENT, "CHAIN": CHAIN, "RETRIEVER": TOOL}
