"""What every panel of the ReConForM tab shares: its sidebar category and poll (``_Base``), and wrapped text."""

import textwrap

CATEGORY = "ReConForM"


def wrapped_label(layout, text: str, icon: str = 'NONE', width: int = 44):
    """``text`` as several labels of at most ``width`` characters (Blender labels do not wrap)."""
    col = layout.column(align=True)
    for k, line in enumerate(textwrap.wrap(text, width)):
        col.label(text=line, icon=icon if k == 0 else 'BLANK1')


class _Base:
    bl_space_type = 'VIEW_3D'
    bl_region_type = 'UI'
    bl_category = CATEGORY

    @classmethod
    def poll(cls, context):
        return getattr(context.scene, "reconform", None) is not None
