"""Write ``nemo_act/benchmarks/examples/support_desk.jsonl``: the larger example of the ``traces`` benchmark.

Invented airline customer-service conversations (ours, written here, no real log), shaped like production agent
logs: a long policy system prompt in every line, the agent's greeting before the user's first message, 10 tools
whose JSON schemas have required arguments and enums, facts an action depends on several turns back (the user's
id, a reservation's cabin), refusals and hand-offs as text replies, and several trials of each task (the line's
``metadata.task``; split with ``benchmark.split_by=task``). Deterministic: the same bytes on every run
(``tests/test_traces.py`` checks the committed file against this script).

Run: ``python tools/examples/make_support_desk.py`` (writes the file; ``--check`` compares instead).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[2] / "nemo_act" / "benchmarks" / "examples" / "support_desk.jsonl"
TRIALS = 3
SEED = 7

POLICY = """You are the customer-service agent of Harbor Air. You help members change, cancel and update their \
reservations, add checked bags, and handle compensation, following this policy exactly.

Identity. Before you look up or change anything, authenticate the member: ask for the email address on their \
account and call find_user with it, or use the member id they give you. Never guess an id. One member per \
conversation: if the caller asks about someone else's reservation, it must be a reservation on their own account.

Reading before writing. Before any change, call get_reservation and read the cabin, the fare, the flights and \
the passengers. Quote the facts the member needs to decide (new fare difference, bag fees, refund amount).

Confirmation. Every action that changes a reservation or issues money (change_flight, cancel_reservation, \
add_bags, update_passenger, issue_certificate) needs the member's explicit "yes" to the exact action you \
describe, in the turn right before the call. If they say anything else, ask again.

Changes. Basic economy fares cannot be changed; other fares can move to another flight between the same \
airports, in any cabin the member chooses, paying the fare difference with a payment method on file (its \
payment id from get_user). Search with search_flights first and offer at most three options.

Cancellations. A reservation can be cancelled with a refund when it was booked less than 24 hours ago, when the \
airline cancelled a flight, or when the member bought travel insurance and cancels for health reasons. Use the \
reason code that applies: change_of_plan, airline_cancelled, health or other. Otherwise, explain that the fare is \
not refundable and offer to change it instead.

Bags. Gold members get two free checked bags per passenger, silver members one, regular members none. Extra bags \
cost 50 dollars each, at most five per reservation, charged to a payment method on file.

Names. You may correct the spelling of a passenger's first or last name (at most three letters changed); any \
larger change is a new passenger and needs a human agent.

Compensation. When a flight arrived more than three hours late, gold and silver members may receive a travel \
certificate of 100 dollars per passenger; regular members 50 dollars per passenger. Issue it with \
issue_certificate, reason delay; for a cancelled flight, reason cancellation, twice the amount.

Hand-off. Transfer to a human agent with transfer_to_agent, with a one-line summary, only when the request is \
outside this policy and the member asks for a person. Do not make up policies, fees or flights. Be brief and \
polite, one question at a time, and never share another member's data."""


def _tool(name: str, description: str, props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    schema = {"type": "object", "properties": props, "required": required, "additionalProperties": False}
    return {"type": "function", "function": {"name": name, "description": description, "parameters": schema}}


S, INT = {"type": "string"}, {"type": "integer"}
CABINS = {"type": "string", "enum": ["basic_economy", "economy", "premium", "business"]}
TOOLS = [
    _tool("find_user", "The member id for an account email.", {"email": S}, ["email"]),
    _tool("get_user", "A member's profile: tier, payment methods, reservations.", {"user_id": S}, ["user_id"]),
    _tool("get_reservation", "A reservation's flights, cabin, fare and passengers.", {"reservation_id": S},
          ["reservation_id"]),
    _tool("search_flights", "Flights between two airports on a date.",
          {"origin": S, "destination": S, "date": S, "cabin": CABINS}, ["origin", "destination", "date"]),
    _tool("change_flight", "Move a reservation to another flight.",
          {"reservation_id": S, "flight_number": S, "cabin": CABINS, "payment_id": S},
          ["reservation_id", "flight_number", "cabin", "payment_id"]),
    _tool("cancel_reservation", "Cancel a reservation.",
          {"reservation_id": S, "reason": {"type": "string",
                                           "enum": ["change_of_plan", "airline_cancelled", "health", "other"]}},
          ["reservation_id", "reason"]),
    _tool("add_bags", "Add checked bags to a reservation.",
          {"reservation_id": S, "count": {"type": "integer", "minimum": 1, "maximum": 5}, "payment_id": S},
          ["reservation_id", "count", "payment_id"]),
    _tool("update_passenger", "Correct a passenger's name.",
          {"reservation_id": S, "passenger_index": INT, "first_name": S, "last_name": S},
          ["reservation_id", "passenger_index", "first_name", "last_name"]),
    _tool("issue_certificate", "Issue a travel certificate.",
          {"user_id": S, "amount": {"type": "number"}, "reason": {"type": "string", "enum": ["delay", "cancellation"]}},
          ["user_id", "amount", "reason"]),
    _tool("transfer_to_agent", "Hand the conversation to a human agent.", {"summary": S}, ["summary"]),
]  # fmt: skip

USERS = [
    {"user_id": "mia_lopez_2041", "email": "mia.lopez@example.com", "name": ("Mia", "Lopez"), "tier": "gold",
     "payment": "card_7731", "reservation": "HX3K9P", "cabin": "economy", "route": ("BOS", "SEA"),
     "date": "2026-12-14", "passengers": 2, "booked_hours_ago": 6},
    {"user_id": "omar_haddad_1187", "email": "omar.h@example.net", "name": ("Omar", "Haddad"), "tier": "silver",
     "payment": "card_2210", "reservation": "QW8Z2L", "cabin": "premium", "route": ("ORD", "DEN"),
     "date": "2026-12-20", "passengers": 1, "booked_hours_ago": 300},
    {"user_id": "yuki_tanaka_5530", "email": "yuki.tanaka@example.org", "name": ("Yuki", "Tanaka"), "tier": "regular",
     "payment": "gift_0093", "reservation": "LM4T7R", "cabin": "basic_economy", "route": ("SFO", "JFK"),
     "date": "2026-12-11", "passengers": 1, "booked_hours_ago": 90},
    {"user_id": "ana_souza_7702", "email": "ana.souza@example.com", "name": ("Ana", "Souza"), "tier": "gold",
     "payment": "card_5567", "reservation": "PD6N1C", "cabin": "business", "route": ("MIA", "LAX"),
     "date": "2026-12-18", "passengers": 3, "booked_hours_ago": 500},
]  # fmt: skip

GREETINGS = ["Hello, thank you for contacting Harbor Air. How can I help you today?",
             "Hi! You've reached Harbor Air support. What can I do for you?", None]  # fmt: skip


class Chat:
    """A conversation being written: messages, call ids, the seeded phrasing choices."""

    def __init__(self, rng: random.Random) -> None:
        self.rng, self.messages, self.n = rng, [{"role": "system", "content": POLICY}], 0

    def say(self, role: str, *options: str) -> None:
        """A text message: one of ``options``, chosen by the seeded generator."""
        self.messages.append({"role": role, "content": self.rng.choice(options)})

    def call(self, name: str, result: Any, text: str | None = None, **args: Any) -> None:
        """An assistant turn calling ``name(**args)`` and the tool message with its ``result``."""
        self.n += 1
        cid = f"call_{self.n:02d}"
        fn = {"name": name, "arguments": json.dumps(args)}
        self.messages.append({"role": "assistant", "content": text,
                              "tool_calls": [{"id": cid, "type": "function", "function": fn}]})  # fmt: skip
        self.messages.append({"role": "tool", "tool_call_id": cid, "content": json.dumps(result)})


def _profile(u: dict[str, Any]) -> dict[str, Any]:
    return {"user_id": u["user_id"], "name": " ".join(u["name"]), "tier": u["tier"],
            "payment_methods": [{"payment_id": u["payment"]}], "reservations": [u["reservation"]]}  # fmt: skip


def _reservation(u: dict[str, Any]) -> dict[str, Any]:
    origin, dest = u["route"]
    pax = [{"first_name": u["name"][0], "last_name": u["name"][1]}] + [
        {"first_name": f"Guest{i}", "last_name": u["name"][1]} for i in range(1, u["passengers"])
    ]
    return {"reservation_id": u["reservation"], "user_id": u["user_id"], "cabin": u["cabin"], "origin": origin,
            "destination": dest, "date": u["date"], "passengers": pax, "booked_hours_ago": u["booked_hours_ago"],
            "insurance": u["tier"] == "gold"}  # fmt: skip


def _authenticate(c: Chat, u: dict[str, Any]) -> None:
    """The opening every task shares: greeting (or not), the request, the email, find_user, get_user."""
    if c.rng.random() < 0.5:  # the member gives the email in the first message or when asked
        c.say("assistant", "Could you give me the email address on your Harbor Air account?",
              "Sure, I can help with that. What is the email on your account?")  # fmt: skip
        c.say("user", f"It's {u['email']}.", f"{u['email']}")
    c.call("find_user", {"user_id": u["user_id"]}, email=u["email"])
    c.call("get_user", _profile(u), user_id=u["user_id"])


def _open(c: Chat, u: dict[str, Any], request: str) -> None:
    greeting = c.rng.choice(GREETINGS)
    if greeting:
        c.messages.append({"role": "assistant", "content": greeting})
    c.say("user", request, f"{request} My email is {u['email']}.")
    if not c.messages[-1]["content"].endswith(f"{u['email']}."):
        _authenticate(c, u)
    else:
        c.call("find_user", {"user_id": u["user_id"]}, email=u["email"])
        c.call("get_user", _profile(u), user_id=u["user_id"])


def cancel(c: Chat, u: dict[str, Any]) -> None:
    """A cancellation: refundable within 24 hours, else for health with insurance, else 'other'."""
    _open(c, u, f"I need to cancel my reservation {u['reservation']}.")
    c.call("get_reservation", _reservation(u), reservation_id=u["reservation"])
    if u["booked_hours_ago"] < 24:
        reason = "change_of_plan"
        c.say("assistant", f"Your reservation {u['reservation']} was booked {u['booked_hours_ago']} hours ago, so it "
              "can be cancelled with a full refund. Shall I cancel it now (yes/no)?")  # fmt: skip
    else:
        c.say("assistant", f"Reservation {u['reservation']} was booked more than 24 hours ago. May I ask why you are "
              "cancelling?")  # fmt: skip
        c.say("user", "I'm sick and my doctor told me not to fly.", "I have a health issue and can't travel.")
        reason = "health" if u["tier"] == "gold" else "other"
        covered = "Your travel insurance covers this: " if reason == "health" else ""
        c.say(
            "assistant",
            f"I'm sorry to hear that. {covered}I can cancel {u['reservation']} now. Do you confirm (yes/no)?",
        )
    c.say("user", "Yes, please cancel it.", "yes")
    c.call("cancel_reservation", {"status": "cancelled", "refund": reason in ("change_of_plan", "health")},
           reservation_id=u["reservation"], reason=reason)  # fmt: skip
    done = f"{u['reservation']} is cancelled"
    c.say("assistant", f"Done: {done}.", f"Your reservation {done} now.")


def change(c: Chat, u: dict[str, Any]) -> None:
    """A date change: search, offer, confirm, change; a basic economy fare is refused and handed off."""
    origin, dest = u["route"]
    new_date = u["date"][:-2] + f"{int(u['date'][-2:]) + 2:02d}"
    _open(c, u, f"Can I move my flight {u['reservation']} to {new_date}?")
    c.call("get_reservation", _reservation(u), reservation_id=u["reservation"])
    if u["cabin"] == "basic_economy":
        c.say("assistant", "I'm sorry, your reservation is a basic economy fare, which cannot be changed. I can tell "
              "you about cancellation options instead.")  # fmt: skip
        c.say("user", "That's ridiculous, I want to talk to a person.", "Then let me talk to a human, please.")
        summary = f"{u['user_id']} wants to change basic economy reservation {u['reservation']} to {new_date}."
        c.call("transfer_to_agent", {"status": "transferred"}, summary=summary)
        return
    flights = [{"flight_number": f"HA{310 + i}", "departs": f"{7 + 4 * i:02d}:15", "fare_difference": 40 * i}
               for i in range(3)]  # fmt: skip
    c.call("search_flights", {"flights": flights}, origin=origin, destination=dest, date=new_date, cabin=u["cabin"])
    pick = c.rng.randrange(3)
    offer = "; ".join(f"{f['flight_number']} at {f['departs']} (+${f['fare_difference']})" for f in flights)
    c.say("assistant", f"On {new_date} I have: {offer}. Which one?")
    c.say("user", f"{flights[pick]['flight_number']} please.", f"The {flights[pick]['departs']} one.")
    c.say("assistant", f"To confirm: move {u['reservation']} to {flights[pick]['flight_number']} on {new_date} in "
          f"{u['cabin']}, paying ${flights[pick]['fare_difference']} with {u['payment']}. Yes?")  # fmt: skip
    c.say("user", "Yes.", "yes, go ahead")
    c.call("change_flight", {"status": "changed"}, reservation_id=u["reservation"],
           flight_number=flights[pick]["flight_number"], cabin=u["cabin"], payment_id=u["payment"])  # fmt: skip
    c.say("assistant", f"Your reservation is now on {flights[pick]['flight_number']} on {new_date}.")


def bags(c: Chat, u: dict[str, Any]) -> None:
    """Extra checked bags: the tier's free allowance quoted, then the paid ones added."""
    count = 1 + c.rng.randrange(3)
    _open(c, u, f"I'd like to add {count} checked bag{'s' * (count > 1)} to {u['reservation']}.")
    c.call("get_reservation", _reservation(u), reservation_id=u["reservation"])
    free = {"gold": 2, "silver": 1, "regular": 0}[u["tier"]] * u["passengers"]
    allowance = f"As a {u['tier']} member you have {free} free checked bag{'s' * (free != 1)} on this reservation."
    c.say(
        "assistant",
        f"{allowance} Adding {count} more costs ${50 * count}, charged to {u['payment']}. Shall I add them?",
    )
    c.say("user", "Yes please.", "ok yes")
    c.call("add_bags", {"status": "added", "charged": 50 * count}, reservation_id=u["reservation"], count=count,
           payment_id=u["payment"])  # fmt: skip
    c.say("assistant", f"{count} bag{'s' * (count > 1)} added to {u['reservation']}.")


def rename(c: Chat, u: dict[str, Any]) -> None:
    """A misspelled first name corrected on passenger 1."""
    first, last = u["name"]
    typo = first[:-1] + first[-1] * 2
    _open(c, u, f"My first name is misspelled as {typo} on {u['reservation']}, it should be {first}.")
    res = _reservation(u)
    res["passengers"][0]["first_name"] = typo
    c.call("get_reservation", res, reservation_id=u["reservation"])
    c.say("assistant", f"I can correct passenger 1 from {typo} {last} to {first} {last}. Do you confirm?")
    c.say("user", "Yes, that's right.", "yes")
    c.call("update_passenger", {"status": "updated"}, reservation_id=u["reservation"], passenger_index=0,
           first_name=first, last_name=last)  # fmt: skip
    c.say("assistant", f"Fixed: the passenger name is now {first} {last}.")


def delay(c: Chat, u: dict[str, Any]) -> None:
    """A delay certificate: the amount per passenger by tier."""
    hours = 3 + c.rng.randrange(1, 4)
    _open(c, u, f"My flight on {u['reservation']} arrived {hours} hours late. Is there any compensation?")
    c.call("get_reservation", _reservation(u), reservation_id=u["reservation"])
    per = 100 if u["tier"] in ("gold", "silver") else 50
    amount = per * u["passengers"]
    c.say("assistant", f"I'm sorry about the delay. I can issue a ${amount} travel certificate ({u['passengers']} "
          f"passenger{'s' * (u['passengers'] > 1)}). Would you like that?")  # fmt: skip
    c.say("user", "Yes, thank you.", "yes please")
    c.call("issue_certificate", {"certificate": f"CERT-{u['reservation']}"}, user_id=u["user_id"], amount=amount,
           reason="delay")  # fmt: skip
    c.say("assistant", f"Certificate CERT-{u['reservation']} for ${amount} has been issued to your account.")


TASKS = {"cancel": cancel, "change": change, "bags": bags, "rename": rename, "delay": delay}


def lines() -> list[str]:
    """The example's JSONL lines: every task for every member, :data:`TRIALS` trials each."""
    rng = random.Random(SEED)
    out = []
    for kind, write in TASKS.items():
        for u in USERS:
            if kind == "bags" and u["cabin"] == "basic_economy":
                continue
            task = f"{kind}-{u['user_id']}"
            for trial in range(TRIALS):
                chat = Chat(random.Random(rng.random()))
                write(chat, u)
                record = {"id": f"{task}-t{trial}", "metadata": {"task": task, "trial": trial}, "tools": TOOLS,
                          "messages": chat.messages}  # fmt: skip
                out.append(json.dumps(record, ensure_ascii=False) + "\n")
    return out


def main(argv: list[str] | None = None) -> int:
    """Write the example, or with ``--check`` say whether the committed file is what this script makes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed file instead")
    args = parser.parse_args(argv)
    text = "".join(lines())
    if args.check:
        same = OUT.is_file() and OUT.read_text(encoding="utf-8") == text
        print(f"{OUT}: {'same' if same else 'DIFFERS from'} what {Path(__file__).name} makes")
        return 0 if same else 1
    OUT.write_text(text, encoding="utf-8")
    print(f"{OUT}: {text.count(chr(10))} traces, {len(text.encode()):,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
