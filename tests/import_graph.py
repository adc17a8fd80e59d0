"""The first import cycle of a module graph, for the tests that forbid them (core's, the add-on's, the tools')."""


def find_cycle(graph: dict):
    """The first cycle of ``graph`` ({node: set of nodes it imports}) as [a, b, ..., a], or None; nodes and their
    edges are visited in sorted order, so the cycle reported is the same run to run."""
    state, stack = {}, []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for t in sorted(graph[m]):
            if state.get(t) == "open":
                return stack[stack.index(t):] + [t]
            if t not in state:
                found = visit(t)
                if found:
                    return found
        stack.pop()
        state[m] = "done"
        return None

    for m in sorted(graph):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None
