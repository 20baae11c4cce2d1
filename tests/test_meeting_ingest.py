"""Meeting transcript ingest (issue 16): POST /api/v1/ingest/transcript with a personal token,
acknowledged at once, debounced (a newer post replaces a pending one), retried, and turned into
one episode with the segments as messages, facts, and action items as tasks.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlmodel import select

from bot.app.build import App
from storage.db import Database
from storage.models import Episode, Fact, IngestJob, Message, Task
from storage.repos.senses import IngestRepo
from storage.repos.users import UserRepo
from tests.fakes.llm import FakeLLM, Step, say
from tests.support.app import AppFactory, add_user
from tests.support.device import add_device
from tests.support.web import client_for

URL = "/api/v1/ingest/transcript"
OMI_HEADERS = {"Content-Type": "application/json"}
SUMMARY = {
    "title": "Release planning",
    "summary": "Ana and the user planned the 2.0 release.",
    "people": ["Ana Lima"],
    "topics": ["release"],
    "facts": [{"text": "The user runs the 2.0 release", "category": "work", "sources": [1]}],
}


def meeting(*lines: tuple[str, str]) -> dict[str, Any]:
    """Our body with these (speaker, text) segments, 10 seconds apart."""
    return {
        "meeting_id": "zoom-8472",
        "title": "Roadmap review",
        "start": "2026-11-20T15:00:00Z",
        "participants": ["Ana Lima"],
        "segments": [
            {"speaker": who, "start": 10.0 * n, "end": 10.0 * n + 8, "text": text}
            for n, (who, text) in enumerate(lines)
        ],
    }


FIRST = meeting(("Ana Lima", "Shall we ship 2.0 in December?"), ("me", "Yes, let's aim for it."))
SECOND = meeting(
    *[(s["speaker"], s["text"]) for s in FIRST["segments"]],
    ("me", "I'll send Ben the release notes."),
)


class Model:
    """The fast model: a summary with one fact, one action item; failures when told to."""

    def __init__(self, llm: FakeLLM, *, fail_actions: int = 0) -> None:
        self.summaries = 0
        self.fail_actions = fail_actions
        llm.default = self.respond

    def respond(self, body: dict[str, Any]) -> Step | None:
        system = str(body["messages"][0]["content"])
        if "maintain the memory" in system:
            self.summaries += 1
            return say(json.dumps(SUMMARY))
        if "action items" in system:
            if self.fail_actions:
                self.fail_actions -= 1
                return Step(status=503)
            return say('{"action_items": [{"title": "Send Ben the release notes"}]}')
        return None  # anything else is unscripted: a failure


def rita_and_offsite(
    asked: list[str], *, max_part: int | None = None
) -> Callable[[dict[str, Any]], Step | None]:
    """The fast model for long meetings: the summary, and the two action items a part says.

    Each part it is asked about goes into ``asked``; ``max_part``: the longest part allowed.
    """

    def respond(body: dict[str, Any]) -> Step | None:
        system = str(body["messages"][0]["content"])
        if "maintain the memory" in system:
            return say(json.dumps(SUMMARY))
        if "action items" in system:
            data = str(body["messages"][-1]["content"])
            asked.append(data)
            assert max_part is None or len(data) <= max_part, len(data)
            items = [
                {"title": title}
                for said, title in (
                    ("send Rita the budget", "Send Rita the budget"),
                    ("book the offsite", "Book the offsite"),
                )
                if said in data
            ]
            return say(json.dumps({"action_items": items}))
        return None

    return respond


async def ready(
    app_factory: AppFactory, fake_llm: FakeLLM, debounce: float = 0.2, **settings: Any
) -> tuple[App, dict[str, str]]:
    """lifebot with Ana, her recorder's token and the meetings worker running.

    ``debounce``: a post waits that long for a newer one (short: the tests that send one post
    per meeting need not wait; those about the debounce choose theirs).
    """
    app = await app_factory(fake_llm, ingest_debounce_seconds=debounce, **settings)
    user = await add_user(app, "ana")
    assert user.id is not None
    _, token = await app.web.auth.new_api_token(user.id, "recorder", "write")
    app.meetings.start()
    return app, {"Authorization": f"Bearer {token}"}


async def user_named(app: App, name: str) -> Any:
    async with app.db.session() as s:
        return await UserRepo(s).find_by_name(name)


async def rows(app: App, model: Any) -> list[Any]:
    async with app.db.session() as s:
        return list((await s.exec(select(model))).all())


async def settled(app: App, within: float = 20.0) -> IngestJob:
    """The one meeting job, once it is no longer pending."""
    [job] = await all_settled(app, 1, within)
    return job


async def all_settled(app: App, count: int, within: float = 20.0) -> list[IngestJob]:
    """The ``count`` meeting jobs posted, once none is pending."""
    async with asyncio.timeout(within):
        while True:
            jobs = list(await rows(app, IngestJob))
            if len(jobs) >= count and all(j.status != "pending" for j in jobs):
                assert len(jobs) == count and all(isinstance(j, IngestJob) for j in jobs)
                return jobs
            await asyncio.sleep(0.05)


async def tasks_after_posting(
    app_factory: AppFactory, fake_llm: FakeLLM, body: dict[str, Any]
) -> list[str]:
    """Post ``body`` as a recorder would, wait until its job is done: the tasks made, sorted."""
    app, auth = await ready(app_factory, fake_llm)
    async with client_for(app) as client:
        assert (await client.post(URL, json=body, headers=auth)).status_code == 202
    assert (await settled(app)).status == "done"
    return sorted(t.title for t in await rows(app, Task))


async def test_posted_twice_within_the_debounce_makes_one_episode(
    app_factory: AppFactory, fake_llm: FakeLLM, app_database_url: str
) -> None:
    model = Model(fake_llm)
    # Long enough that the second post lands inside it even on a loaded machine (a second post
    # after the debounce rightly runs the meeting again, which is not what this test is about).
    app, auth = await ready(
        app_factory, fake_llm, debounce=4.0, database_url_setting=app_database_url
    )
    async with client_for(app) as client:
        first = await client.post(URL, json=FIRST, headers=auth)
        assert first.status_code == 202
        assert fake_llm.chat_requests == []  # acknowledged before any work
        second = await client.post(URL, json=SECOND, headers=auth)
    assert second.status_code == 202
    assert second.json()["job_id"] == first.json()["job_id"]  # the newer post replaced it
    [pending] = await rows(app, IngestJob)
    assert pending.status == "pending" and fake_llm.chat_requests == []  # still waiting
    # The pass due when the debounce ends (run now rather than waited for: the worker's own
    # timing is what the other tests here wait on).
    await app.meetings.run_due(pending.due_at)

    job = await settled(app)

    assert job.status == "done"
    [episode] = await rows(app, Episode)
    assert job.episode_id == episode.id
    assert episode.title == "Roadmap review"  # the meeting's own title
    assert "Ana Lima" in (episode.people or [])
    said = [m.text for m in await rows(app, Message) if m.channel == "meeting"]
    assert said == [s["text"] for s in SECOND["segments"]]
    assert len(episode.source_message_ids or []) == 3
    assert [t.title for t in await rows(app, Task)] == ["Send Ben the release notes"]
    assert [f.text for f in await rows(app, Fact)] == ["The user runs the 2.0 release"]
    assert model.summaries == 1


async def test_a_failure_is_retried_and_still_makes_one_episode(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    Model(fake_llm, fail_actions=3)  # every try of the first run fails (llm_max_retries=2)
    app, auth = await ready(app_factory, fake_llm, ingest_retry_seconds=0.5)
    async with client_for(app) as client:
        assert (await client.post(URL, json=SECOND, headers=auth)).status_code == 202

    job = await settled(app)

    assert (job.status, job.attempts) == ("done", 2)
    assert len(await rows(app, Episode)) == 1
    assert [t.title for t in await rows(app, Task)] == ["Send Ben the release notes"]


async def test_an_action_item_early_in_a_long_meeting_becomes_a_task(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    """Only the last 12,000 characters were read for action items: an hour's first half was not."""
    chatter = "and then we went over the numbers for the quarter once more, slowly " * 6
    long_meeting = meeting(
        ("me", "I'll send Rita the budget by Friday."),
        *[("Ana Lima", f"{chatter} ({n})") for n in range(80)],  # about 33,000 characters
        ("Ana Lima", "Let's also book the offsite."),
    )
    asked: list[str] = []

    fake_llm.default = rita_and_offsite(asked, max_part=12_100)  # each read the size it was
    titles = await tasks_after_posting(app_factory, fake_llm, long_meeting)
    assert titles == ["Book the offsite", "Send Rita the budget"]
    # The whole transcript, in parts the model can read, every line in exactly one of them.
    assert len(asked) > 1
    for segment in long_meeting["segments"]:
        assert sum(segment["text"] in part for part in asked) == 1, segment["text"][-12:]


async def test_a_meeting_too_long_to_read_whole_yields_its_first_and_last_action_items(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    """Past MAX_ACTION_PARTS parts, the model reads the first and the last eight, no more."""
    chatter = "we went over the quarter's numbers line by line once more " * 100  # 5,800
    long_meeting = meeting(
        ("me", "I'll send Rita the budget by Friday."),
        *[("Ana Lima", f"{chatter} (#{n:02d})") for n in range(40)],  # 20 parts, 235,000 chars
        ("Ana Lima", "Let's also book the offsite."),
    )
    asked: list[str] = []

    fake_llm.default = rita_and_offsite(asked)
    titles = await tasks_after_posting(app_factory, fake_llm, long_meeting)
    assert titles == ["Book the offsite", "Send Rita the budget"]
    assert len(asked) == 16  # of 20 parts: the model is asked at most 16 times
    assert "send Rita the budget" in asked[0] and "book the offsite" in asked[-1]
    # In order, none twice: the first eight parts (two segments each), then the last eight;
    # the middle (#16-#23) is left to the summary and facts.
    read = [n for part in asked for n in range(40) if f"(#{n:02d})" in part]
    assert read == [*range(16), *range(24, 40)]


async def test_a_model_answering_action_items_that_are_not_a_list_still_settles_the_job(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    """{"action_items": 2} raised a TypeError no retry path caught: the job was never settled
    and ran again (memory extraction and every part read) each retry period, for ever."""
    asked: list[int] = []

    def respond(body: dict[str, Any]) -> Step | None:
        system = str(body["messages"][0]["content"])
        if "maintain the memory" in system:
            return say(json.dumps(SUMMARY))
        if "action items" in system:
            asked.append(1)
            return say('{"action_items": 2}')
        return None

    fake_llm.default = respond
    app, auth = await ready(app_factory, fake_llm, ingest_retry_seconds=0.3)
    body = {**SECOND, "action_items": ["Send Ben the release notes"]}
    async with client_for(app) as client:
        assert (await client.post(URL, json=body, headers=auth)).status_code == 202

    job = await settled(app, within=5.0)

    assert (job.status, job.attempts) == ("done", 1)
    assert [t.title for t in await rows(app, Task)] == ["Send Ben the release notes"]
    await asyncio.sleep(1.0)  # three retry periods: nothing runs again
    assert len(asked) == 1


async def test_action_items_the_model_did_not_give_as_words_make_no_task(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    """A title that is a number, a list or an object became a task named "42" or "{'a': 1}";
    a title over several lines kept its line breaks. Only words become tasks, on one line."""
    answer = {
        "action_items": [
            {"title": 42},
            {"title": {"text": "Book the offsite"}},
            {"title": ["Call", "Rita"]},
            {"title": True},
            {"title": "  Send Ben\n the   release notes  "},
            "Book the offsite",  # a bare title, not in an object: still an item
        ]
    }

    def respond(body: dict[str, Any]) -> Step | None:
        system = str(body["messages"][0]["content"])
        if "maintain the memory" in system:
            return say(json.dumps(SUMMARY))
        if "action items" in system:
            return say(json.dumps(answer))
        return None

    fake_llm.default = respond
    titles = await tasks_after_posting(app_factory, fake_llm, SECOND)
    assert titles == ["Book the offsite", "Send Ben the release notes"]


def omi_conversation(action_items: object) -> dict[str, Any]:
    """A conversation as Omi's backend posts it, with ``action_items`` as its structured ones."""
    return {
        "id": "b3f1c2",
        "created_at": "2026-11-20T15:31:00Z",
        "started_at": "2026-11-20T15:00:00Z",
        "finished_at": "2026-11-20T15:30:00Z",
        "discarded": False,
        "structured": {
            "title": "Coffee with Ana",
            "overview": "Talked about the release.",
            "emoji": "☕",
            "category": "work",
            "action_items": action_items,
            "events": [],
        },
        "transcript_segments": [
            {
                "text": "Can you book the venue?",
                "speaker": "SPEAKER_01",
                "speaker_id": 1,
                "is_user": False,
                "start": 0.0,
                "end": 3.0,
            },
            {
                "text": "Sure, I will.",
                "speaker": "SPEAKER_00",
                "speaker_id": 0,
                "is_user": True,
                "start": 3.5,
                "end": 5.0,
            },
        ],
    }


async def test_omis_conversation_webhook_is_accepted(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    Model(fake_llm)
    app, _ = await ready(app_factory, fake_llm)
    omi = omi_conversation([{"description": "Book the venue", "completed": False}])
    _, device_token = await add_device(app, "omi", await user_named(app, "ana"))
    # Exactly as Omi's backend posts it (backend/utils/webhooks.py): the configured URL with
    # "?uid=<omi user>" appended, the conversation as JSON, Content-Type and nothing else.
    body = json.dumps(omi).encode()
    omi_url = f"/omi/{device_token}/conversation?uid=omi-user"
    async with client_for(app) as client:
        bearer_only = await client.post(f"{URL}?uid=omi-user", content=body, headers=OMI_HEADERS)
        wrong = await client.post(
            "/omi/lbd_nope/conversation?uid=u", content=body, headers=OMI_HEADERS
        )
        answer = await client.post(omi_url, content=body, headers=OMI_HEADERS)
    assert bearer_only.status_code == 401  # the old README step: every conversation refused
    assert wrong.status_code == 401
    assert answer.status_code == 202, answer.text
    assert answer.json()["meeting_id"] == "omi:b3f1c2"

    await settled(app)

    [episode] = await rows(app, Episode)
    assert episode.title == "Coffee with Ana"
    speakers = [m.sender_id for m in await rows(app, Message) if m.channel == "meeting"]
    assert speakers == ["SPEAKER_01", "me"]
    titles = sorted(t.title for t in await rows(app, Task))
    assert titles == ["Book the venue", "Send Ben the release notes"]


async def test_omis_action_items_that_are_not_words_make_no_task_and_fail_nothing(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    """Omi's action items as a number (a TypeError) or with a number for a description (a task
    named "42"): the conversation is still taken, and only words become tasks."""
    Model(fake_llm)
    app, _ = await ready(app_factory, fake_llm)
    _, device_token = await add_device(app, "omi", await user_named(app, "ana"))
    numbers = {**omi_conversation(5), "id": "n1"}
    mixed = {
        **omi_conversation([{"description": 42}, {"description": "Book  the\nvenue"}]),
        "id": "n2",
    }
    url = f"/omi/{device_token}/conversation?uid=omi-user"
    async with client_for(app) as client:
        answers = [
            await client.post(url, content=json.dumps(b).encode(), headers=OMI_HEADERS)
            for b in (numbers, mixed)
        ]
    assert [a.status_code for a in answers] == [202, 202], [a.text for a in answers]
    assert [j.status for j in await all_settled(app, 2)] == ["done", "done"]
    titles = sorted(t.title for t in await rows(app, Task))
    assert titles == ["Book the venue", "Send Ben the release notes"]


async def test_no_token_or_a_bad_body_is_refused_in_plain_words(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    app, auth = await ready(app_factory, fake_llm)
    async with client_for(app) as client:
        anonymous = await client.post(URL, json=FIRST)
        wrong = await client.post(URL, json=FIRST, headers={"Authorization": "Bearer lbk_nope"})
        broken = await client.post(URL, json={"meeting_id": "x", "segments": []}, headers=auth)
        not_json = await client.post(URL, content=b"{oops", headers=auth)

    assert (anonymous.status_code, wrong.status_code) == (401, 401)
    assert broken.status_code == 422
    assert "start" in broken.json()["detail"] and "segments" in broken.json()["detail"]
    assert not_json.status_code == 400
    assert await rows(app, IngestJob) == []


async def test_posts_of_one_meeting_arriving_together_queue_one_job(
    app_factory: AppFactory, fake_llm: FakeLLM, app_database_url: str
) -> None:
    """A recorder that re-sends its growing transcript in a burst: one job, one episode."""
    Model(fake_llm)
    # A burst of eight posts lands inside a 1 s debounce even on a loaded machine.
    app, auth = await ready(
        app_factory, fake_llm, debounce=1.0, database_url_setting=app_database_url
    )
    async with client_for(app) as client:
        posted = await asyncio.gather(
            *(client.post(URL, json=body, headers=auth) for body in [FIRST, SECOND] * 4)
        )
    assert [r.status_code for r in posted] == [202] * 8  # none refused, none lost
    assert len({r.json()["job_id"] for r in posted}) == 1

    job = await settled(app)
    assert job.status == "done"
    assert len(await rows(app, Episode)) == 1


async def test_upgrading_keeps_the_newest_of_duplicate_pending_jobs(
    postgres_or_sqlite_url: str,
) -> None:
    """Jobs queued twice before the fix: after the upgrade the newest post is the one done."""
    db = Database(postgres_or_sqlite_url)
    try:
        await db.migrate("0014_threads")  # before the index: duplicates could be queued
        now = datetime.now(UTC)
        async with db.session() as s:
            user = await UserRepo(s).create("ana")
            for v in (1, 2):
                s.add(IngestJob(user_id=user.id or 0, meeting_key="z", body={"v": v}, due_at=now))
        await db.migrate()
        async with db.session() as s:
            jobs = sorted((await s.exec(select(IngestJob))).all(), key=lambda j: j.id or 0)
        assert [(j.body, j.status) for j in jobs] == [({"v": 1}, "failed"), ({"v": 2}, "pending")]
    finally:
        await db.dispose()


async def test_a_transcript_with_impossible_times_or_no_words_is_refused_and_nothing_queued(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    """A segment 30 000 years in, a meeting in year 9999 or only blank lines: a 422 in words.

    Accepted, such a body could never be stored (the time overflows) and its job came back
    every minute for ever, with the recorder told it was taken.
    """
    app, auth = await ready(app_factory, fake_llm)
    far = meeting(("Ana Lima", "Hello"))
    far["segments"][0].update(start=1e12, end=1e12 + 5)
    late = meeting(("Ana Lima", "Hello"))
    late["start"] = "9999-12-31T23:59:00Z"
    blank = meeting(("Ana Lima", "   "), ("me", ""))
    async with client_for(app) as client:
        answers = [await client.post(URL, json=body, headers=auth) for body in (far, late, blank)]
        fine = await client.post(URL, json=FIRST, headers=auth)

    assert [a.status_code for a in answers] == [422, 422, 422]
    details = [a.json()["detail"] for a in answers]
    assert "seconds from the meeting's start" in details[0]
    assert "year" in details[1]
    assert "no words" in details[2]
    assert fine.status_code == 202  # the endpoint keeps answering
    assert len(await rows(app, IngestJob)) == 1


async def test_a_stored_job_that_can_never_be_read_fails_once_instead_of_for_ever(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    """A job queued before the checks above (a segment 30 000 years in) is settled as failed."""
    app, _ = await ready(app_factory, fake_llm)
    body = meeting(("Ana Lima", "Hello"))
    body["segments"][0].update(start=1e12, end=1e12 + 5)
    user = await user_named(app, "ana")
    now = datetime.now(UTC)
    async with app.db.session() as s:
        await IngestRepo(s).submit(user.id, "zoom-8472", body, now, now)
    # Queued behind the worker's back: if its first look came before the row, it would sleep
    # until its next poll (a minute), as the full suite's timing once showed.
    app.meetings.wake()

    job = await settled(app)

    assert job.status == "failed"
    assert "seconds from the meeting's start" in (job.last_error or "")
    assert fake_llm.chat_requests == []


async def test_a_transcript_longer_to_process_than_the_retry_wait_runs_once_across_processes(
    app_factory: AppFactory, fake_llm: FakeLLM, app_database_url: str
) -> None:
    """Two processes, a model slower than LIFEBOT_INGEST_RETRY_SECONDS: the running job was
    taken again by the other process after the wait (its claim lapsed), and processed twice."""
    model = Model(fake_llm)
    plain = model.respond

    summarizing = asyncio.Event()

    def slow(body: dict[str, Any]) -> Step | None:
        step = plain(body)
        if step is not None and "maintain the memory" in str(body["messages"][0]["content"]):
            step.delay = 1.4  # a long transcript's summary
            summarizing.set()
        return step

    fake_llm.default = slow
    settings = {"ingest_retry_seconds": 0.25, "database_url_setting": app_database_url}
    app, auth = await ready(app_factory, fake_llm, debounce=0.1, **settings)
    other = await app_factory(fake_llm, ingest_debounce_seconds=0.1, **settings)
    async with client_for(app) as client:
        accepted = await client.post(URL, json=FIRST, headers=auth)
    assert accepted.status_code == 202
    async with asyncio.timeout(10):  # the first process is inside the (slow) summary
        await summarizing.wait()
    await asyncio.sleep(0.6)  # more than twice the retry wait, while the summary still runs
    await other.meetings.run_due(datetime.now(UTC))  # the other process's pass, awaited
    job = await settled(app)  # and the first process's run has ended too
    [episode] = await rows(app, Episode)
    actions = [
        r for r in fake_llm.chat_requests if "action items" in str(r["messages"][0]["content"])
    ]
    assert job.status == "done"
    assert job.episode_id == episode.id  # the run that made the episode is the one recorded
    assert len(actions) == 1
    assert len(await rows(app, Episode)) == 1


async def test_a_nul_in_a_transcript_is_dropped_and_the_meeting_stored(
    app_factory: AppFactory, fake_llm: FakeLLM, app_database_url: str
) -> None:
    # The job was taken with 202 and then failed on PostgreSQL's text columns for ever.
    Model(fake_llm)
    app, auth = await ready(app_factory, fake_llm, database_url_setting=app_database_url)
    body = meeting(("Ana\x00 Lima", "Shall we ship\x00 2.0?"), ("me", "Yes\x00."))
    async with client_for(app) as client:
        posted = await client.post(URL, json=body, headers=auth)
    assert posted.status_code == 202, posted.text

    job = await settled(app)

    assert job.status == "done", job.last_error
    said = [m.text for m in await rows(app, Message) if m.channel == "meeting"]
    assert said == ["Shall we ship 2.0?", "Yes."]


async def test_an_unexpected_failure_is_retried_a_bounded_number_of_times_and_holds_no_one_up(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    """A failure of no expected kind (here the database refusing the task row) left the job
    pending for ever, taken again every retry period, and stopped the pass: the other people's
    meetings queued behind it waited as long."""
    from sqlalchemy import text

    from bot.jobs.meetings.ingest import MAX_ATTEMPTS

    Model(fake_llm)
    app = await app_factory(fake_llm, ingest_retry_seconds=60)
    ana, bob = await add_user(app, "ana"), await add_user(app, "bob")
    assert ana.id is not None and bob.id is not None
    start = datetime.now(UTC)
    async with app.db.session() as s:
        await IngestRepo(s).submit(ana.id, "zoom-1", SECOND, start, start)
        later = start + timedelta(seconds=1)
        await IngestRepo(s).submit(bob.id, "zoom-2", SECOND, later, later)
    async with app.db.engine.begin() as conn:  # Ana's tasks cannot be written
        await conn.execute(
            text(
                f"CREATE TRIGGER no_tasks BEFORE INSERT ON task WHEN NEW.user_id = {ana.id} "
                "BEGIN SELECT RAISE(ABORT, 'disk I/O error'); END"
            )
        )

    now = start + timedelta(seconds=2)
    assert await app.meetings.run_due(now) == 1  # Bob's meeting, behind Ana's, is done
    for _ in range(2, MAX_ATTEMPTS + 3):  # then a pass every retry period
        now += timedelta(seconds=61)
        assert await app.meetings.run_due(now) == 0
    jobs = {j.user_id: j for j in await rows(app, IngestJob)}
    assert jobs[bob.id].status == "done"
    assert (jobs[ana.id].status, jobs[ana.id].attempts) == ("failed", MAX_ATTEMPTS)
    assert "disk I/O error" in (jobs[ana.id].last_error or "")
    assert [t.user_id for t in await rows(app, Task)] == [bob.id]
