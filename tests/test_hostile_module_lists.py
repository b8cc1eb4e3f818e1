"""Module lists (one program per core) at the limits: more programs than cores are refused
at load, naming the limit; what the modules of a list share is made once, not once per
module (a list of N programs loaded in time and memory quadratic in N before)."""

import json
import os

import pytest

import birsim

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX = birsim._birsim.limits["max_cores"]


def _program():
    with open(os.path.join(ROOT, "examples", "tiled_matmul.json")) as fh:
        return json.load(fh)


@pytest.mark.parametrize("form", ["text", "list", "simulator"])
def test_more_modules_than_cores_are_refused_at_load(form):
    m = _program()
    with pytest.raises(birsim.ProgramError, match="list of %d modules.*at most %d cores"
                       % (MAX + 1, MAX)):
        if form == "text":
            birsim.load(json.dumps([m] * (MAX + 1)))
        elif form == "list":
            birsim.load([m] * (MAX + 1))
        else:
            birsim.Simulator([m] * (MAX + 1))
    assert len(birsim.load([m] * MAX)) == MAX


def test_the_modules_of_a_list_share_their_tensor_tables():
    mods = birsim.load([_program()] * 4)
    assert all(m._all_tensors is mods[0]._all_tensors for m in mods)
    assert all(m._loc_rows is mods[0]._loc_rows for m in mods)
    # ... while each keeps its own tensors and inputs
    assert [len(m.tensors) for m in mods] == [len(mods[0].tensors)] * 4
    assert all(t in m._all_tensors for m in mods for t in m.tensors)
    assert len({id(t) for m in mods for t in m.tensors}) == 4 * len(mods[0].tensors)
