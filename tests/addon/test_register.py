import pytest

bpy = pytest.importorskip("bpy")


def test_addon_enables_in_its_bl_ext_namespace(addon):
    assert addon.__name__ == "bl_ext.reconform_test.reconform"
    assert addon.reconform_addon.__package__ == "bl_ext.reconform_test.reconform.reconform_addon"
    import addon_utils
    assert addon_utils.check("bl_ext.reconform_test.reconform")[1]
