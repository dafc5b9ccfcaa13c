"""The drift matrix: for each attribute, the reference value and the nodes that differ from it.

The reference is the majority value (strictly more nodes than any other value), or the
golden node's value when one is given. With no majority (two nodes that disagree, a
cluster split down the middle) there is no reference: every group is listed and no node
is singled out as "the odd one". Nodes that could not say (None) are listed apart and
never count as a difference.
"""

from __future__ import annotations
from collections import Counter

from ncdoc.cluster.attributes import Attr, AttributeTable, natural
from ncdoc.startup.record import record

MAJORITY, GOLDEN, NONE = "majority", "golden", "none"


@record
class AttrDrift:
    attr: Attr
    reference: str | None                          # the value nodes should have; None when no majority
    basis: str                                     # majority | golden | none
    groups: tuple[tuple[str, tuple[str, ...]], ...]  # (value, nodes), the most common first
    odd: tuple[str, ...]                           # nodes whose known value differs from the reference
    unknown: tuple[str, ...] = ()                  # nodes that could not say

    @property
    def key(self) -> str:
        return self.attr.key

    def value_of(self, node: str) -> str | None:
        for value, nodes in self.groups:
            if node in nodes:
                return value
        return None

    def to_dict(self) -> dict:
        return {"attribute": self.attr.key, "label": self.attr.label, "group": self.attr.group,
                "affects_nccl": self.attr.affects_nccl, "reference": self.reference, "basis": self.basis,
                "values": [{"value": v, "nodes": list(n)} for v, n in self.groups],
                "odd": list(self.odd), "unknown": list(self.unknown)}


def _sorted_nodes(nodes) -> tuple[str, ...]:
    return tuple(sorted(nodes, key=natural))


def attribute_drift(attr: Attr, column: dict[str, str | None], golden: str | None = None,
                    golden_given: bool = False) -> AttrDrift | None:
    """The drift of one attribute, or None when every node that knows agrees (and with the golden)."""
    known = {n: v for n, v in column.items() if v is not None}
    counts = Counter(known.values())
    if not counts:
        return None
    if len(counts) == 1 and (not golden_given or golden is None or golden in counts):
        return None
    by_value: dict[str, list[str]] = {}
    for n, v in known.items():
        by_value.setdefault(v, []).append(n)
    ranked = counts.most_common()
    if golden_given and golden is not None:
        reference, basis = golden, GOLDEN
    elif len(ranked) == 1 or ranked[0][1] > ranked[1][1]:
        reference, basis = ranked[0][0], MAJORITY
    else:
        reference, basis = None, NONE
    groups = tuple((v, _sorted_nodes(by_value[v])) for v, _ in ranked)
    odd = () if reference is None else _sorted_nodes(n for n, v in known.items() if v != reference)
    unknown = _sorted_nodes(n for n, v in column.items() if v is None)
    return AttrDrift(attr, reference, basis, groups, odd, unknown)


def drift(table: AttributeTable, golden: dict[str, str | None] | None = None) -> list[AttrDrift]:
    """Every attribute on which the nodes (or a node and the golden values) disagree, in table order.

    `golden`: attribute key -> value of the golden configuration; attributes it lacks are
    judged by majority, and a key the golden has but no node shows is not a drift here.
    """
    out = []
    for key, column in table.values.items():
        g_given = golden is not None and key in golden
        d = attribute_drift(table.attrs[key], column, golden.get(key) if g_given else None, g_given)
        if d is not None:
            out.append(d)
    return out


__all__ = ["AttrDrift", "attribute_drift", "drift", "MAJORITY", "GOLDEN", "NONE"]
