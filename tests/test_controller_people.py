"""People and places as records, through dispatch: names resolve before any search."""

from __future__ import annotations

from bot.agent.contact_offer import ContactOffer, spot_contact
from bot.app.build import App
from storage.models import Place
from tests.fakes.channel import RecordingChannel
from tests.fakes.llm import FakeLLM, call, say
from tests.support.app import AppFactory, add_user, channel
from tests.support.builders import make_inbound
from tests.support.web import client_for


async def test_a_name_two_contacts_share_is_asked_back_then_resolved(
    app: App, fake_llm: FakeLLM
) -> None:
    await add_user(app)
    for line in ("Ana Silva | Ana, Aninha | sister", "Ana Costa | Ana | colleague"):
        await app.dispatcher.handle(make_inbound(f"/contact add {line}"))
    listed = (await app.dispatcher.handle(make_inbound("/contacts"))).reply or ""
    assert "Ana Silva · sister · also called Ana, Aninha" in listed

    await app.dispatcher.handle(make_inbound("what did Ana say about the trip?"))
    sent = channel(app).sent[-1]
    assert sent.text == "Which Ana?"
    assert [b.label for b in sent.buttons] == ["Ana Costa", "Ana Silva", "Other"]
    assert fake_llm.chat_requests == []  # the controller asked; no model call was needed

    fake_llm.add(say("I found nothing from Ana Silva about the trip yet."))
    silva = next(b for b in sent.buttons if b.label == "Ana Silva")
    await app.dispatcher.handle(make_inbound("Ana Silva", callback_data=silva.data))
    system = fake_llm.chat_requests[-1]["messages"][0]["content"]
    assert '"ana" is Ana Silva · sister' in system and "Ana Costa" not in system
    assert channel(app).texts()[-1] == "I found nothing from Ana Silva about the trip yet."


async def test_a_contact_and_a_place_resolve_before_the_search(app: App, fake_llm: FakeLLM) -> None:
    user = await add_user(app)
    await app.dispatcher.handle(make_inbound("/contact add Jordan Lee | Jordan | friend"))
    async with app.db.session() as s:
        s.add(Place(user_id=user.id or 0, name="Jordan's house", lat=38.7, lon=-9.1))
    fake_llm.add(say("I don't know yet."))
    await app.dispatcher.handle(make_inbound("where was I before Jordan's house last week?"))
    system = fake_llm.chat_requests[-1]["messages"][0]["content"]
    assert '"jordan" is Jordan Lee · friend' in system
    assert "\"Jordan's house\" is the place Jordan's house" in system


async def test_a_person_described_in_chat_is_offered_and_saved_only_on_yes(
    app_factory: AppFactory, fake_llm: FakeLLM
) -> None:
    app = await app_factory(fake_llm)
    app.dispatcher.register(RecordingChannel("fake"))
    await add_user(app)
    fake_llm.add(say("Got it."))
    await app.dispatcher.handle(make_inbound("my sister Ana's number is +351 912 345 678."))
    sent = channel(app).sent[-1]
    assert sent.text == (
        "Got it.\n\nShall I save Ana as a contact? (Ana · sister · +351 912 345 678)"
    )
    assert [b.label for b in sent.buttons] == ["Yes, save", "No"]
    listed = (await app.dispatcher.handle(make_inbound("/contacts"))).reply or ""
    assert listed.startswith("No contacts yet")  # nothing saved before the user says yes

    # The offer is kept with the message: a press after a restart still saves it.
    await app.close()
    app = await app_factory(fake_llm)
    app.dispatcher.register(RecordingChannel("fake"))
    yes = sent.buttons[0]
    said = (await app.dispatcher.handle(make_inbound("Yes", callback_data=yes.data))).reply
    assert said is not None and said.startswith("Saved #") and "+351 912 345 678" in said
    again = (await app.dispatcher.handle(make_inbound("Yes", callback_data=yes.data))).reply
    assert again == "You already answered that one."
    listed = (await app.dispatcher.handle(make_inbound("/contacts"))).reply or ""
    assert "Ana · sister · reach: +351 912 345 678" in listed

    # The same person again: nothing new to offer.
    fake_llm.add(say("Sure."))
    await app.dispatcher.handle(make_inbound("my sister Ana's number is +351 912 345 678."))
    assert channel(app).sent[-1].buttons == []


async def test_no_keeps_nothing(app: App, fake_llm: FakeLLM) -> None:
    await add_user(app)
    fake_llm.add(say("Nice."))
    await app.dispatcher.handle(make_inbound("Jordan is my colleague, he sits near my desk"))
    sent = channel(app).sent[-1]
    assert sent.text.endswith("Shall I save Jordan as a contact? (Jordan · colleague)")
    said = (
        await app.dispatcher.handle(make_inbound("No", callback_data=sent.buttons[1].data))
    ).reply
    assert said == "Fine, I won't save Jordan."
    listed = (await app.dispatcher.handle(make_inbound("/contacts"))).reply or ""
    assert listed.startswith("No contacts yet")


async def test_a_reminder_names_its_people_and_place_and_shows_them(
    app: App, fake_llm: FakeLLM
) -> None:
    user = await add_user(app)
    assert user.id is not None
    await app.dispatcher.handle(make_inbound("/contact add Ana Silva | Ana | sister"))
    fake_llm.add(
        call(
            "set_reminder",
            {
                "request": "tomorrow at 6pm to bring the cake",
                "people": ["Ana Silva"],
                "place": "Jordan's house",
            },
        ),
        say("Done."),
    )
    await app.dispatcher.handle(make_inbound("remind me tomorrow at 6pm to bring the cake to Ana"))
    result = fake_llm.chat_requests[-1]["messages"][-1]["content"]
    assert "(at Jordan's house; with Ana Silva)" in result
    listed = (await app.dispatcher.handle(make_inbound("/reminders"))).reply or ""
    assert "bring the cake (at Jordan's house; with Ana Silva)" in listed

    _, token = await app.web.auth.new_api_token(user.id, "script", "write")
    async with client_for(app) as web:
        [shown] = (
            await web.get("/api/v1/reminders", headers={"Authorization": f"Bearer {token}"})
        ).json()["items"]
    assert shown["place"] == "Jordan's house" and shown["people"] == ["Ana Silva"]


def test_a_question_about_an_appointment_offers_no_contact() -> None:
    # A voice note heard "Where is my dentist appointment?": not a person called "Where".
    assert spot_contact("Where is my dentist appointment?") is None
    assert spot_contact("When is my dentist appointment?") is None
    assert spot_contact("Ana is my dentist.") == ContactOffer("Ana", "dentist")
