"""LangChain's `with_structured_output` against openclaw-host, both of its methods: a JSON
schema in `response_format`, and a tool the model is forced to call. Prints what each parsed."""
import json
import os
from typing import Literal

from langchain_openai import ChatOpenAI
from pydantic import BaseModel, Field


class Forecast(BaseModel):
    """A weather forecast."""

    unit: Literal["celsius", "fahrenheit"]
    days: int = Field(ge=1, le=7)
    rain: bool


llm = ChatOpenAI(
    base_url=os.environ["OPENCLAW_BASE_URL"],
    api_key=os.environ.get("OPENCLAW_API_KEY", "local"),
    model=os.environ.get("OPENCLAW_MODEL", "default"),
    max_tokens=80,
    temperature=1.0,
    max_retries=0,
)
out = {}
for method in ["json_schema", "function_calling"]:
    runnable = llm.with_structured_output(Forecast, method=method, include_raw=True)
    r = runnable.invoke("What is the weather in Lisbon this week?")
    parsed = r["parsed"]
    out[method] = {
        "parsed": parsed.model_dump() if parsed is not None else None,
        "error": repr(r["parsing_error"]) if r["parsing_error"] else None,
        "raw": r["raw"].content if isinstance(r["raw"].content, str) else None,
        "tool_calls": len(r["raw"].tool_calls),
    }
print(json.dumps(out))
