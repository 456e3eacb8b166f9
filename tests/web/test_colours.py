"""One colour per person: the Python slot (the terminal editor's) and the JavaScript one
(every tab's) agree, whatever the member's tab number or incarnation."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from groupcomm.apps.colours import SLOTS, colour_slot, person
from groupcomm.apps.edit_screen import COLOURS

STATIC = Path(__file__).resolve().parents[2] / "groupcomm" / "web" / "static"
NAMES = ["ann", "ben", "cat", "ted", "tom", "uli", "ann:2", "ben~3", "ann:2~4", "zoë", "李雷",
         "o'brien", ""]


def test_a_persons_tabs_and_incarnations_share_a_slot_within_the_palette() -> None:
    assert person("ann:2~4") == "ann" == person("ann~2") == person("ann")
    assert colour_slot("ann:2~4") == colour_slot("ann")
    assert all(0 <= colour_slot(name) < SLOTS for name in NAMES)
    assert len(COLOURS) == SLOTS
    # a hash, not the order of arrival: a few names already cover several slots
    assert len({colour_slot(name) for name in NAMES}) >= 4


def test_the_page_and_the_terminal_give_a_person_the_same_colour() -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the page's colour function cannot be run")
    script = (f"import {{ colourSlot }} from {json.dumps(str(STATIC / 'colours.js'))};"
              f"console.log(JSON.stringify({json.dumps(NAMES)}.map(colourSlot)));")
    run = subprocess.run([node, "--input-type=module", "-e", script], capture_output=True,
                         text=True, timeout=30, check=True)
    assert json.loads(run.stdout) == [colour_slot(name) for name in NAMES]
