"""The namespace's names for its storages (capture.memory.names), on CPU tensors: data_ptr and the
walk are the same as on a GPU."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from gpumagic.capture.memory.names import (  # noqa: E402
    PRECEDENCE,
    NameTable,
    module_tree,
    name_storages,
    owner_module,
)


class Block(torch.nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.ln = torch.nn.LayerNorm(d)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d, 2 * d), torch.nn.GELU())
        self.register_buffer("scale", torch.ones(d))

    def forward(self, x):
        return self.mlp(self.ln(x)) * self.scale.sum()


def _trained():
    model = torch.nn.Sequential(Block(8), torch.nn.Linear(16, 4))
    opt = torch.optim.AdamW(model.parameters())
    model(torch.randn(3, 8)).sum().backward()
    opt.step()
    return model, opt


def _by_addr(table: NameTable) -> dict[int, tuple[str, str, str]]:
    return table.lookup()


def test_parameters_gradients_buffers_and_optimizer_state_have_dotted_names():
    model, opt = _trained()
    x = torch.randn(5, 8)
    table = name_storages({"model": model, "opt": opt, "x": x})
    rows = table.rows.set_index("name")
    w = model[0].mlp[0].weight
    assert rows.loc["model.0.mlp.0.weight", "addr"] == w.untyped_storage().data_ptr()
    assert rows.loc["model.0.mlp.0.weight", "category"] == "parameters"
    assert rows.loc["model.0.mlp.0.weight", "module"] == "model.0.mlp.0"
    assert rows.loc["model.0.mlp.0.weight.grad", "category"] == "gradients"
    assert rows.loc["model.0.mlp.0.weight.grad", "module"] == "model.0.mlp.0"
    assert rows.loc["model.0.scale", "kind"] == "buffer"
    state = "opt.state[model.0.mlp.0.weight]['exp_avg_sq']"
    assert rows.loc[state, "category"] == "optimizer state"
    assert rows.loc[state, "module"] == "model.0.mlp.0"
    assert rows.loc[state, "addr"] == opt.state[w]["exp_avg_sq"].untyped_storage().data_ptr()
    assert rows.loc["x", "category"] == "inputs" and rows.loc["x", "bytes"] == 5 * 8 * 4
    # every parameter, its gradient and its two AdamW states, once each (the "step" counters are
    # CPU tensors here too: they are named as well)
    n_params = len(list(model.parameters()))
    counts = table.rows["kind"].value_counts()
    assert counts["parameter"] == n_params and counts["gradient"] == n_params
    assert counts["optimizer state"] == 3 * n_params  # exp_avg, exp_avg_sq, step
    assert table.rows["addr"].is_unique


def test_a_tensor_reached_twice_is_named_once_by_precedence():
    model, opt = _trained()
    w = model[1].weight
    view = w[:2]  # a view: the same storage
    # bound to names before the model in the namespace's order: the parameter's name still wins
    table = name_storages({"w": w, "head": view, "model": model, "opt": opt})
    addr = w.untyped_storage().data_ptr()
    hits = table.rows[table.rows["addr"] == addr]
    assert len(hits) == 1
    assert hits["name"].item() == "model.1.weight" and hits["kind"].item() == "parameter"
    # a submodule bound to its own name is named from the outer module
    block = model[0]
    table = name_storages({"blk": block, "model": model})
    assert "model.0.ln.weight" in set(table.rows["name"])
    assert not any(n.startswith("blk.") for n in table.rows["name"])
    assert PRECEDENCE.index("parameter") < PRECEDENCE.index("input")


def test_containers_one_level_down_and_private_names_skipped():
    a, b, c = torch.randn(4), torch.randn(6), torch.randn(7)
    table = name_storages(
        {"batch": [a, {"deep": c}], "d": {"k": b}, "_": torch.randn(9), "Out": {1: c}}
    )
    names = set(table.rows["name"])
    assert names == {"batch[0]", "d['k']"}  # c sits two levels down; "_" and Out are IPython's


def test_device_filter_keeps_only_that_device():
    t = torch.randn(3)
    assert len(name_storages({"t": t}, device="cpu")) == 1
    assert len(name_storages({"t": t}, device=0)) == 0  # cuda:0: a CPU tensor is not on it


def test_module_tree_names_forward_code_and_children_in_order():
    model, _ = _trained()
    tree = module_tree({"model": model, "first": model[0]})
    assert tree.roots == ("model",)
    info = tree.modules["model.0"]
    assert info.cls == "Block" and info.function == "forward"
    assert info.filename == __file__ and info.first <= Block.forward.__code__.co_firstlineno + 1
    assert info.children == ("model.0.ln", "model.0.mlp")
    assert tree.modules["model.0.mlp"].children == ("model.0.mlp.0", "model.0.mlp.1")


def test_records_from_a_file_follow_the_same_precedence():
    rows = [
        {"name": "x", "category": "input", "data_ptr": 4096, "storage_bytes": 512},
        {"name": "m.fc.weight", "category": "parameter", "data_ptr": 4096, "storage_bytes": 512},
        {
            "name": "opt.state[m.fc.weight]['exp_avg']",
            "category": "optimizer state",
            "data_ptr": 8192,
            "storage_bytes": 512,
        },
    ]
    table = NameTable.from_records(rows)
    got = table.lookup()
    assert got[4096] == ("m.fc.weight", "parameters", "m.fc")
    assert got[8192][2] == "m.fc"
    with pytest.raises(ValueError, match="kind is 'weights'"):
        NameTable.from_records([{"name": "a", "kind": "weights", "addr": 1, "bytes": 1}])


def test_owner_module():
    assert owner_module("model.blocks.0.mlp.0.weight.grad", "gradient") == "model.blocks.0.mlp.0"
    assert owner_module("opt.state[model.fc.bias]['exp_avg']", "optimizer state") == "model.fc"
    assert owner_module("batch[0]", "input") == "batch[0]"
    unowned = "opt.state[param_groups[0]['params'][3]]['exp_avg']"
    assert owner_module(unowned, "optimizer state") == "opt"


def test_optimizer_state_of_a_parameter_no_module_holds():
    w = torch.nn.Parameter(torch.randn(4, 4))
    opt = torch.optim.AdamW([w])
    w.sum().backward()
    opt.step()
    table = name_storages({"opt": opt})  # w itself is not in the namespace
    rows = table.rows.set_index("name")
    name = "opt.state[param_groups[0]['params'][0]]['exp_avg']"
    assert rows.loc[name, "module"] == "opt" and rows.loc[name, "category"] == "optimizer state"


def test_a_compiled_module_is_named_as_the_model_it_compiles():
    model, opt = _trained()
    compiled = torch.compile(model)  # not called: nothing is compiled, only wrapped
    table = name_storages({"compiled": compiled, "model": model, "opt": opt})
    names = set(table.rows["name"])
    assert "compiled.0.mlp.0.weight" in names and not any("_orig_mod" in n for n in names)
    assert table.rows["addr"].is_unique
    tree = module_tree({"compiled": compiled})
    assert tree.roots == ("compiled",) and "compiled.0.mlp.0" in tree.modules


class TiedLM(torch.nn.Module):
    """A head tied to its embedding, as GPT-2 and Llama-style models tie them."""

    def __init__(self) -> None:
        super().__init__()
        self.tok = torch.nn.Embedding(11, 6)
        self.head = torch.nn.Linear(6, 11, bias=False)
        self.head.weight = self.tok.weight

    def forward(self, idx):
        return self.head(self.tok(idx))


def test_a_tied_parameter_is_listed_under_every_name_it_has():
    llm = TiedLM()
    llm(torch.tensor([[1, 2, 3]])).sum().backward()
    table = name_storages({"llm": llm})
    rows = table.rows.set_index("name")
    weight = llm.tok.weight.untyped_storage().data_ptr()
    assert rows.loc["llm.tok.weight (tied: llm.head.weight)", "addr"] == weight
    assert rows.loc["llm.tok.weight (tied: llm.head.weight)", "module"] == "llm.tok"
    grad = rows.loc["llm.tok.weight.grad (tied: llm.head.weight)"]
    assert grad["addr"] == llm.tok.weight.grad.untyped_storage().data_ptr()
    assert grad["category"] == "gradients"
    assert table.rows["addr"].is_unique  # one storage, one row: the bytes counted once
    untied = name_storages({"model": torch.nn.Linear(3, 3)}).rows
    assert not untied["name"].str.contains("tied").any()
