"""The user's code, imported by reference: ``"package.module:function"``.

    fn = import_trainable("train_mnist:train_func")  # experiment.trainable, checked callable
    takes_config(fn)                                # called as fn(config), as Ray Train calls it

Used by validation (``sweeps.config.validate``), by every rank before it runs the loop
(``sweeps.trial.backends``) and by a checkpoint's model loader (``sweeps.loop.checkpoint``):
one rule for what a reference is and for what an import error means. Imports no Ray.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
from collections.abc import Callable
from typing import Any

from sweeps.config.loop_api import check_trainable_class
from sweeps.errors import ConfigError

__all__ = ["EXTRAS", "import_function", "import_trainable", "required_args", "takes_config",
           "require"]


def require(ok: bool, key: str, value: object, rule: str, fix: str) -> None:
    """Raise ``ConfigError(key, value, rule, fix)`` unless ``ok`` (validate's checks)."""
    if not ok:
        raise ConfigError(key, value, rule, fix)


# A module that a built-in experiment needs and a sweeps extra installs: that extra. Ray's
# Lightning utilities fall back to the older package name, so either missing names the extra.
EXTRAS = {"transformers": "hf", "tokenizers": "hf", "accelerate": "hf",
          "lightning": "lightning", "pytorch_lightning": "lightning"}


def _missing_extra_module(exc: BaseException) -> str | None:
    """The top-level module of ``EXTRAS`` whose absence caused ``exc``, innermost first: a
    library may re-raise its own ``ModuleNotFoundError`` without a name (Ray's Lightning
    utilities do), the missing module is then in the chain it raised from.

    Example:
        >>> exc = ModuleNotFoundError("PyTorch Lightning isn't installed")  # no name
        >>> exc.__context__ = ModuleNotFoundError("No module named 'lightning'", name="lightning")
        >>> _missing_extra_module(exc)
        'lightning'
    """
    chain: list[BaseException] = []
    while exc is not None and exc not in chain:
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    for link in reversed(chain):
        top = (getattr(link, "name", None) or "").split(".")[0]
        if isinstance(link, ModuleNotFoundError) and top in EXTRAS:
            return top
    return None


def import_function(ref: str, key: str, example: str) -> Any:
    """Import ``"package.module:function"`` and return the callable, or raise ``ConfigError``
    naming ``key``; a missing module that a ``sweeps`` extra provides names the extra.

    Example:
        >>> import_function("json:dumps", "experiment.x", "json:dumps").__name__
        'dumps'
    """
    fix = f"write it as 'package.module:function', e.g. {example}"
    module_name, sep, attr = ref.partition(":")
    require(bool(sep and module_name and attr), key, ref, "is not 'module:function'", fix)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        top = _missing_extra_module(exc)
        if top is not None and top != module_name.split(".")[0]:
            raise ConfigError(key, ref, f"needs {top}, which is not installed",
                              f"install sweeps[{EXTRAS[top]}]: pip install "
                              f"'sweeps[{EXTRAS[top]}]' (`make install` in a checkout)") from exc
        raise ConfigError(key, ref, f"cannot be imported ({type(exc).__name__}: {exc})",
                          "check the module path, that its package is installed, or run from "
                          "the directory that holds it") from exc
    except Exception as exc:  # the module itself raised while importing
        raise ConfigError(key, ref, f"raised {type(exc).__name__} on import ({exc})",
                          f"fix the error in {module_name}") from exc
    if not hasattr(module, attr):
        public = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_")
                        and getattr(v, "__module__", None) == module.__name__)
        close = difflib.get_close_matches(attr, public, n=1)
        hint = f"did you mean {module_name}:{close[0]}? " if close else ""
        raise ConfigError(key, ref, f"names nothing in {module_name}",
                          f"{hint}functions there: {', '.join(public[:8]) or 'none'}")
    fn = getattr(module, attr)
    require(callable(fn), key, ref, f"is a {type(fn).__name__}, not a function",
             f"point it at a function, e.g. `def {attr}(config): ...`")
    return fn


def import_trainable(ref: str, key: str = "experiment.trainable",
                     example: str = "trainables.digits:train_mlp", arity: int | None = None) -> Any:
    """Import ``"package.module:function"`` and return the function, or raise ``ConfigError``.

    Example:
        >>> import_trainable("trainables.digits:train_mlp").__name__
        'train_mlp'
    """
    fn = import_function(ref, key, example)
    if arity is None:
        check_trainable_class(ref, fn)
    try:
        required = required_args(fn)
    except (TypeError, ValueError):  # a builtin without a signature: let Ray decide
        return fn
    limit = 1 if arity is None else arity
    if required > limit or (arity is not None and required != arity):
        raise ConfigError(key, ref, f"takes {required} required arguments",
                          f"Ray Train and Ray Tune call it with {limit} (config)"
                          if arity is None else
                          f"it is called with {arity} (the checkpoint directory)")
    return fn


def required_args(fn: Callable[..., Any]) -> int:
    """Required positional parameters of ``fn``, counted as Ray Train counts them."""
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(1 for p in inspect.signature(fn).parameters.values()
               if (p.kind in kinds and p.default is p.empty) or p.kind == p.VAR_POSITIONAL)


def takes_config(fn: Callable[..., Any]) -> bool:
    """Whether Ray Train would call ``fn(config)`` (one required parameter) or ``fn()``.

    Example:
        >>> takes_config(lambda config: None), takes_config(lambda config=None: None)
        (True, False)
    """
    return required_args(fn) == 1
