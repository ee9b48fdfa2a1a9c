"""Write the decision quality set: ``catalogue.json`` (50 tools) and ``examples.jsonl``.

Deterministic (a seeded ``random.Random``): running it again rewrites the same bytes, so
the committed files are this script's output. The catalogue mixes four realistic domains
(support desk, devops, CRM, files); each example is an instruction an agent of such a
desk would get, with the tools a person would call for it (``relevant``). The set is
labelled by construction: every task template names the tools it needs.

    python bench/decide_data/generate.py
"""

# ruff: noqa: E501 -- the catalogue is a data table: one tool, one line of description

from __future__ import annotations

import json
import random
from pathlib import Path

HERE = Path(__file__).parent


def tool(tool_name: str, description: str, /, **props: str) -> dict:
    schema = {
        "type": "object",
        "properties": {k: {"type": "string", "description": v} for k, v in props.items()},
        "required": sorted(props),
    }
    return {"name": tool_name, "description": description, "input_schema": schema}


CATALOGUE = [
    # support desk
    tool(
        "get_ticket",
        "Read a support ticket: subject, status, messages. Use it to see what a ticket is about and where it stands.",
        ticket_id="ticket",
    ),
    tool(
        "search_tickets",
        "Find support tickets matching a text query. Use it to find earlier or similar support requests and complaints.",
        query="text",
    ),
    tool(
        "reply_to_ticket",
        "Send a reply to the customer on a ticket. Use it to answer, tell or update the customer.",
        ticket_id="t",
        body="b",
    ),
    tool(
        "add_internal_note",
        "Add a private note on a ticket, visible to agents only. Use it to leave a comment, link or remark for colleagues on the ticket.",
        ticket_id="ticket",
        note="text",
    ),
    tool(
        "close_ticket",
        "Mark a support ticket as solved and close it. Use it when the problem is fixed or the request is done.",
        ticket_id="ticket",
    ),
    tool(
        "reopen_ticket",
        "Reopen a closed support ticket. Use it when a customer says a solved problem is back.",
        ticket_id="ticket",
    ),
    tool(
        "assign_ticket",
        "Assign a ticket to a support agent or group. Use it to give or hand over a ticket to someone.",
        ticket_id="t",
        assignee="agent",
    ),
    tool(
        "set_ticket_priority",
        "Change a ticket's priority (low, normal, high, urgent). Use it to make a ticket urgent or less important.",
        ticket_id="ticket",
        priority="level",
    ),
    tool(
        "escalate_ticket",
        "Escalate a ticket to the tier-2 team with a reason. Use it for problems the first line cannot solve.",
        ticket_id="ticket",
        reason="why",
    ),
    tool(
        "merge_tickets",
        "Merge a duplicate ticket into another ticket. Use it when two tickets are the same request.",
        source="t",
        target="t",
    ),
    tool(
        "issue_refund",
        "Refund a payment of an order to the customer. Use it to give a customer their money back.",
        order_id="order",
        amount="amount",
    ),
    tool(
        "lookup_order",
        "Look up an order: items, shipping status, payment. Use it to check where an order is or what it contained.",
        order_id="order",
    ),
    tool(
        "create_return_label",
        "Create a prepaid shipping label to return an order. Use it when a customer wants to send an order back.",
        order_id="order",
    ),
    # devops
    tool(
        "restart_service",
        "Restart a service (a Kubernetes deployment) in a cluster. Use it when a service is stuck, hanging or unresponsive.",
        service="name",
        cluster="cluster",
    ),
    tool(
        "scale_service",
        "Change the number of replicas of a deployment. Use it to add or remove capacity before or after traffic changes.",
        service="name",
        replicas="count",
    ),
    tool(
        "deploy_release",
        "Deploy a version of a service to an environment. Use it to ship or roll out a new version or build.",
        service="name",
        version="tag",
        environment="env",
    ),
    tool(
        "rollback_release",
        "Roll a service back to its previous release. Use it when a release broke something.",
        service="name",
    ),
    tool(
        "get_service_logs",
        "Fetch recent log lines of a service. Use it to see errors and messages a service printed.",
        service="name",
        since="duration",
    ),
    tool(
        "query_metrics",
        "Query a monitoring metric (latency, error rate, CPU) over time. Use it to see graphs and numbers such as p99 latency or error rate.",
        metric="name",
        window="duration",
    ),
    tool(
        "list_alerts",
        "List the monitoring alerts that are firing now. Use it to see which alerts are active.",
        severity="level",
    ),
    tool(
        "acknowledge_alert",
        "Acknowledge a firing alert so on-call stops being paged. Use it to stop the pager for an alert someone is handling.",
        alert_id="alert",
    ),
    tool(
        "create_incident",
        "Open an incident with a title and severity. Use it when a service is down or degraded for users.",
        title="t",
        severity="sev",
    ),
    tool(
        "page_oncall",
        "Page the on-call engineer of a team. Use it to wake up or alert the engineer on call.",
        team="team",
        message="text",
    ),
    tool(
        "run_database_migration",
        "Run pending schema migrations on a database. Use it to apply schema changes to a database.",
        database="db",
    ),
    tool(
        "rotate_secret",
        "Rotate an API key or password stored in the secret manager. Use it when a key, token or password leaked or expires.",
        secret="name",
    ),
    tool(
        "get_build_status",
        "Read the status of a CI pipeline build. Use it to check whether a CI build passed or failed before deploying it.",
        build_id="build",
    ),
    # CRM
    tool(
        "find_contact",
        "Find a contact (person) in the CRM by name or email. Use it to look up a person's record, email or phone before changing it.",
        query="text",
    ),
    tool(
        "create_contact",
        "Create a new contact in the CRM. Use it to add a person who is not in the CRM yet.",
        name="n",
        email="e",
    ),
    tool(
        "update_contact",
        "Update fields of a CRM contact (phone, title, address). Use it to change a person's details in their record.",
        contact_id="c",
        fields="f",
    ),
    tool(
        "get_account",
        "Read a company account: plan, owner, revenue, contacts. Use it to see who owns a customer company and what plan they are on.",
        account_id="account",
    ),
    tool(
        "create_deal",
        "Create a sales deal (opportunity) for an account. Use it to open a new opportunity with an expected amount.",
        account_id="a",
        amount="value",
    ),
    tool(
        "update_deal_stage",
        "Move a deal to another pipeline stage (won, lost, ...). Use it when a deal is won, lost or moves forward.",
        deal_id="deal",
        stage="stage",
    ),
    tool(
        "log_call",
        "Log a phone call with a contact and its summary. Use it to record a phone conversation.",
        contact_id="c",
        summary="s",
    ),
    tool(
        "schedule_meeting",
        "Schedule a meeting with a contact on the calendar. Use it to book a demo, call or meeting at a time.",
        contact_id="c",
        time="when",
    ),
    tool(
        "send_email",
        "Send an email to a contact from the CRM. Use it to email a contact a message, quote or document.",
        contact_id="c",
        body="b",
    ),
    tool(
        "add_to_campaign",
        "Add a contact to a marketing email campaign. Use it to put a contact on a mailing or webinar list.",
        contact_id="c",
        campaign="name",
    ),
    tool(
        "get_sales_report",
        "Summarize sales pipeline numbers for a period. Use it to see how the sales pipeline and revenue look.",
        period="p",
    ),
    tool(
        "create_task",
        "Create a follow-up task for a sales rep with a due date. Use it to remind a rep to follow up or do something by a date.",
        owner="rep",
        due="date",
    ),
    # files
    tool(
        "list_files",
        "List the files and folders in a directory. Use it to see what a folder contains.",
        path="dir",
    ),
    tool(
        "read_file",
        "Read the text content of a file. Use it to open a file and see what it says.",
        path="file",
    ),
    tool(
        "write_file",
        "Write text content to a file, replacing it. Use it to save or create a file with new text, such as notes or minutes.",
        path="file",
        content="text",
    ),
    tool(
        "delete_file",
        "Delete a file. Use it to remove a file that is no longer needed.",
        path="file",
    ),
    tool(
        "move_file",
        "Move or rename a file. Use it to rename a file or put it somewhere else.",
        source="path",
        destination="path",
    ),
    tool(
        "copy_file",
        "Copy a file to another location. Use it to duplicate a file, for example into a backup folder.",
        source="path",
        destination="path",
    ),
    tool(
        "search_files",
        "Search file contents for a text pattern (like grep). Use it to find which files mention a word or name.",
        pattern="text",
        path="dir",
    ),
    tool(
        "compress_folder",
        "Create a zip archive of a folder. Use it to zip a folder before sending it.",
        path="dir",
    ),
    tool(
        "extract_archive",
        "Extract a zip or tar archive into a folder. Use it to unpack or unzip an archive.",
        path="archive",
    ),
    tool(
        "share_file",
        "Share a file with a person by creating a link. Use it to give a person access to a file or archive.",
        path="file",
        email="who",
    ),
    tool(
        "get_file_info",
        "Read a file's size, owner and modification time. Use it to see how big a file is and when it changed.",
        path="file",
    ),
    tool(
        "convert_document",
        "Convert a document to another format (PDF, DOCX, Markdown). Use it to turn a file into a PDF or another format.",
        path="file",
        format="fmt",
    ),
]

TICKETS = ["T-1042", "T-2210", "T-3187", "T-4410", "T-5521", "T-6032", "T-7781", "T-8120"]
ORDERS = ["A-1001", "B-2230", "C-3117", "D-4820", "E-5501", "F-6609"]
PEOPLE = ["Maria Lopez", "Ken Watanabe", "Aisha Khan", "Tom Becker", "Lena Novak", "Raj Patel"]
SERVICES = ["checkout-api", "payments", "search", "auth-gateway", "image-resizer", "billing"]
FILES = ["reports/q3.csv", "notes/meeting.md", "contracts/acme.docx", "logs/app.log",
         "data/export.json", "slides/kickoff.pptx"]  # fmt: skip
DIRS = ["reports", "invoices/2024", "projects/website", "backups", "shared/legal"]
COMPANIES = ["Acme Corp", "Globex", "Initech", "Umbrella Ltd", "Stark Industries"]

TASKS: list[tuple[str, list[str]]] = [
    # support desk
    ("What is the status of ticket {t}? Summarize the conversation.", ["get_ticket"]),
    ("Find all tickets where customers complain about {topic}.", ["search_tickets"]),
    ("Answer the customer on {t}: their replacement ships tomorrow.", ["reply_to_ticket"]),
    ("Leave a private note for the team on {t} that legal must review it.", ["add_internal_note"]),
    (
        "The issue in {t} is fixed; tell the customer and close the ticket.",
        ["reply_to_ticket", "close_ticket"],
    ),
    ("The customer wrote back about {t}, the problem is back; reopen it.", ["reopen_ticket"]),
    ("Give ticket {t} to {p} from the billing group.", ["assign_ticket"]),
    (
        "Ticket {t} is about a production outage for a big customer: make it urgent and "
        "escalate to tier 2.",
        ["set_ticket_priority", "escalate_ticket"],
    ),
    ("{t} and {t2} are the same request; merge them.", ["merge_tickets"]),
    ("Order {o} arrived broken. Refund the customer in full.", ["lookup_order", "issue_refund"]),
    ("Where is order {o}? The customer has been waiting for two weeks.", ["lookup_order"]),
    (
        "The customer wants to send back order {o}; give them a return label.",
        ["create_return_label"],
    ),
    (
        "Read ticket {t} and, if it asks for a refund of order {o}, refund it.",
        ["get_ticket", "issue_refund"],
    ),
    (
        "Search for earlier tickets about {topic} and note the links on {t}.",
        ["search_tickets", "add_internal_note"],
    ),
    # devops
    (
        "{s} is stuck and not answering requests; restart it in the prod cluster.",
        ["restart_service"],
    ),
    ("Traffic doubles tonight: scale {s} up to 12 replicas.", ["scale_service"]),
    ("Ship version 2.4.1 of {s} to staging.", ["deploy_release"]),
    ("The last release of {s} broke checkout; roll it back now.", ["rollback_release"]),
    ("Show me the errors {s} logged in the last 30 minutes.", ["get_service_logs"]),
    ("How did p99 latency of {s} evolve over the last day?", ["query_metrics"]),
    ("Which critical alerts are firing right now?", ["list_alerts"]),
    (
        "I'm looking at the disk alert on {s}; acknowledge it so the pager stops.",
        ["acknowledge_alert"],
    ),
    (
        "{s} is down for all users: open a SEV1 incident and page the platform on-call.",
        ["create_incident", "page_oncall"],
    ),
    ("Apply the pending schema migrations to the orders database.", ["run_database_migration"]),
    ("The {s} API key leaked in a public repo; rotate it.", ["rotate_secret"]),
    ("Did CI build 8812 of {s} pass?", ["get_build_status"]),
    (
        "Error rate of {s} is climbing: check its logs and its error-rate metric.",
        ["get_service_logs", "query_metrics"],
    ),
    (
        "Check that CI build 9120 of {s} passed, then deploy it to production.",
        ["get_build_status", "deploy_release"],
    ),
    # CRM
    ("Do we have {p} in the CRM? I need their email.", ["find_contact"]),
    ("Add {p} ({email}) as a new contact.", ["create_contact"]),
    (
        "Find {p} in the CRM and update their phone number and job title.",
        ["find_contact", "update_contact"],
    ),
    ("Who owns the {c} account and what plan are they on?", ["get_account"]),
    ("Open a 40k opportunity for {c}.", ["create_deal"]),
    ("We won the {c} deal; move it to closed won.", ["update_deal_stage"]),
    ("I just spoke with {p} on the phone about pricing; record the call.", ["log_call"]),
    ("Book a demo with {p} next Tuesday at 10.", ["schedule_meeting"]),
    ("Email {p} the renewal quote.", ["send_email"]),
    ("Put {p} on the spring webinar campaign list.", ["add_to_campaign"]),
    ("How is the sales pipeline looking this quarter?", ["get_sales_report"]),
    ("Remind the account rep to follow up with {c} by Friday.", ["create_task"]),
    (
        "Look up {p}, send them a thank-you email and schedule a follow-up meeting.",
        ["find_contact", "send_email", "schedule_meeting"],
    ),
    (
        "{c} signed: mark their deal won and create an onboarding task for the rep.",
        ["update_deal_stage", "create_task"],
    ),
    # files
    ("What is in the {d} folder?", ["list_files"]),
    ("Open {f} and tell me what it says.", ["read_file"]),
    ("Save these meeting minutes to notes/minutes.md.", ["write_file"]),
    ("Remove {f}, we do not need it anymore.", ["delete_file"]),
    ("Rename {f} to archive/old-{n}.", ["move_file"]),
    ("Make a copy of {f} in backups/.", ["copy_file"]),
    ("Which files in {d} mention the word invoice?", ["search_files"]),
    ("Zip the {d} folder so I can send it.", ["compress_folder"]),
    ("Unpack the archive backups/site.tar.gz into projects/.", ["extract_archive"]),
    ("Give {p} access to {f}.", ["share_file"]),
    ("How big is {f} and when was it last changed?", ["get_file_info"]),
    ("Turn {f} into a PDF.", ["convert_document"]),
    (
        "Find the file in {d} that mentions Acme and share it with {p}.",
        ["search_files", "share_file"],
    ),
    ("Read {f}, then write a cleaned-up version to {f2}.", ["read_file", "write_file"]),
    ("Zip {d} and share the archive with {p}.", ["compress_folder", "share_file"]),
]
TOPICS = ["late deliveries", "login failures", "double charges", "missing invoices",
          "broken zippers", "the mobile app crashing"]  # fmt: skip


def examples(rng: random.Random, per_task: int) -> list[dict]:
    found = []
    for template, relevant in TASKS:
        for _ in range(per_task):
            t, t2 = rng.sample(TICKETS, 2)
            f, f2 = rng.sample(FILES, 2)
            person = rng.choice(PEOPLE)
            slots = {
                "t": t, "t2": t2, "o": rng.choice(ORDERS), "p": person,
                "s": rng.choice(SERVICES), "f": f, "f2": f2, "d": rng.choice(DIRS),
                "c": rng.choice(COMPANIES), "topic": rng.choice(TOPICS),
                "n": f.rsplit("/", 1)[-1],
                "email": person.lower().replace(" ", ".") + "@example.com",
            }  # fmt: skip
            found.append(
                {
                    "instruction": template.format(**slots),
                    "catalogue": "catalogue.json",
                    "relevant": relevant,
                }
            )
    return found


def main() -> None:
    assert len(CATALOGUE) == 50, len(CATALOGUE)
    names = {t["name"] for t in CATALOGUE}
    assert all(set(r) <= names for _, r in TASKS)
    rng = random.Random(21)
    found = examples(rng, per_task=4)
    (HERE / "catalogue.json").write_text(json.dumps(CATALOGUE, indent=1) + "\n")
    lines = "".join(json.dumps(e, sort_keys=True) + "\n" for e in found)
    (HERE / "examples.jsonl").write_text(lines)
    print(f"{len(CATALOGUE)} tools, {len(found)} examples")


if __name__ == "__main__":
    main()
