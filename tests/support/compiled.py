"""Whether the modules under test are mypyc's C extensions (setup.py, `KGC_COMPILE=1`): a
few tests look at what only Python objects show."""

import coordinator.group.classic.group as _probe

COMPILED = not _probe.__file__.endswith(".py")


def attributes(obj: object) -> dict:
    """An object's attributes by name, from `__dict__`, `__slots__` or, compiled, the C fields
    mypyc lists in `__mypyc_attrs__`."""
    names = getattr(type(obj), "__mypyc_attrs__", None)
    if names is None:
        if hasattr(obj, "__dict__"):
            return dict(vars(obj))
        names = [name for cls in type(obj).__mro__ for name in getattr(cls, "__slots__", ())]
    return {name: getattr(obj, name) for name in names if name != "__dict__" and hasattr(obj, name)}
