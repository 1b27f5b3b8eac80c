"""The signal line's offers and answers between the worker and a VM's init: an offer is
written again until its own answer comes, and only its own answer ends it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from bodega.worker.drivers.vm.core.qemu import VmLaunch, launch_record
from bodega.worker.drivers.vm.machines import LAUNCH, answers_signals
from bodega.worker.drivers.vm.signal_line import Offer, offer_until_taken, read_taken

ID = "0123456789abcdef"
EARLIER = "fedcba9876543210"


def test_an_offer_is_one_line_the_init_reads_as_word_id_and_number() -> None:
    line = Offer(15, ID).line()
    assert line == f"signal {ID} 15\n".encode()
    assert line.decode().split() == ["signal", ID, "15"]


def test_a_consoles_offer_is_its_verb_its_id_and_its_words() -> None:
    resize = Offer(0, ID, verb="resize", words=(EARLIER, "33", "101"))
    assert resize.line() == f"resize {ID} {EARLIER} 33 101\n".encode()
    assert Offer(0, ID, verb="hangup", words=(EARLIER,)).line() == \
        f"hangup {ID} {EARLIER}\n".encode()
    assert (resize.what(), Offer(15, ID).what()) == ("a console's resize", "signal 15")
    assert resize.taken_by(f"taken {ID}\n".encode())


def test_each_offer_has_an_id_of_its_own() -> None:
    assert len({Offer(2).offer_id for _ in range(100)}) == 100


@pytest.mark.parametrize(("line", "taken"), [
    (f"taken {ID}\n", True),
    (f"taken {ID}\r\n", True),
    (f"taken {EARLIER}\n", False),  # an earlier offer's answer, late
    (f"taken {ID[3:]}\n", False),
    (f"aken {ID}\n", False),
    (f"taken {ID} more\n", False),
    (f"signal {ID} 15\n", False),  # the port's own echo
    ("\n", False),
])
def test_only_its_own_answer_takes_an_offer(line: str, taken: bool) -> None:
    assert Offer(15, ID).taken_by(line.encode()) is taken


async def test_an_offer_is_written_again_until_the_init_answers_it() -> None:
    reader = asyncio.StreamReader()
    written: list[bytes] = []
    offer = Offer(2, ID)

    async def write(data: bytes) -> None:
        written.append(data)
        if len(written) == 3:  # the init opened its port: it reads this one and answers
            reader.feed_data(f"taken {EARLIER}\ngarbage\ntaken {ID}\n".encode())

    assert await offer_until_taken(reader, write, offer, resend_every=0.001, offered_for=30)
    assert written == [offer.line()] * 3, "the same line, the same id: taken once"


async def test_an_offer_no_init_answers_ends_after_its_time() -> None:
    written: list[bytes] = []

    async def write(data: bytes) -> None:
        written.append(data)

    assert not await offer_until_taken(asyncio.StreamReader(), write, Offer(15, ID),
                                       resend_every=0.001, offered_for=0.05)
    assert len(written) > 1


async def test_a_line_closed_before_the_answer_is_the_vm_gone() -> None:
    reader = asyncio.StreamReader()
    reader.feed_data(f"taken {EARLIER}\ntaken {ID[:5]}".encode())
    reader.feed_eof()
    with pytest.raises(EOFError):
        await read_taken(reader, Offer(15, ID))

    async def write(data: bytes) -> None:
        pass

    closed = asyncio.StreamReader()
    closed.feed_eof()
    with pytest.raises(EOFError):
        await offer_until_taken(closed, write, Offer(15, ID), resend_every=30)


async def test_a_line_too_long_to_be_an_answer_is_passed_over() -> None:
    reader = asyncio.StreamReader(limit=64)
    reader.feed_data(b"x" * 200 + f"\ntaken {ID}\n".encode())
    await read_taken(reader, Offer(15, ID))


def test_a_vm_is_offered_signals_if_its_kept_boot_says_its_init_answers(tmp_path: Path) -> None:
    launch = VmLaunch(vmlinuz=Path("/k"), initramfs=Path("/i"), cpus=1, memory_mb=256,
                      accel="tcg", init_answers_signals=True)
    (tmp_path / LAUNCH).write_bytes(launch_record(launch))
    assert answers_signals(tmp_path)
    # A boot an older bodega kept: its init reads bare numbers.
    older = json.loads(launch_record(launch))
    del older["init_answers_signals"]
    (tmp_path / LAUNCH).write_text(json.dumps(older))
    assert not answers_signals(tmp_path)
    (tmp_path / LAUNCH).unlink()
    assert not answers_signals(tmp_path)
