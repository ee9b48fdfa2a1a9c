"""One turn of a conversation in a process of its own (so a test can kill it mid-run).

``turn_script.py DB SPEC start|resume|verify RUN_ID [CONVERSATION PROMPT]``; prints JSON.
"""

from __future__ import annotations

import json
import sys

from plait import Agent

db, spec, mode, run_id, *rest = sys.argv[1:]
with Agent(
    spec, instructions="Be brief.", db=db, model_settings={"max_retries": 0}, telemetry=False
) as bot:
    if mode == "start":
        conversation, prompt = rest
        state = bot.run_sync(prompt, conversation_id=conversation, run_id=run_id)
        print(json.dumps({"status": state.status, "output": state.output}))
    elif mode == "resume":
        state = bot.resume_sync(run_id)
        print(json.dumps({"status": state.status, "output": state.output}))
    else:
        print(json.dumps(bot.verify(run_id).to_json()))
