"""Extension package root: Blender loads this file; the add-on lives in ``reconform_addon``."""

from .reconform_addon import register, unregister  # noqa: F401
