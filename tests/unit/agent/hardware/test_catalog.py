import pytest

from agent.hardware.catalog import CatalogError, load_catalog, parse_modules, parse_releases


def test_packaged_tables_load_every_row() -> None:
    catalog = load_catalog()
    assert len(catalog.modules) == 10
    assert len(catalog.releases) == 11


@pytest.mark.parametrize(
    ("part", "module", "soc", "dla"),
    [
        ("p3767-0003", "Jetson Orin Nano 8GB", "tegra234", 0),
        ("p3767-0000", "Jetson Orin NX 16GB", "tegra234", 2),
        ("P3701-0005", "Jetson AGX Orin 64GB", "tegra234", 2),
        ("p3668-0000", "Jetson Xavier NX (devkit)", "tegra194", 2),
    ],
)
def test_module_is_found_by_part_number(part: str, module: str, soc: str, dla: int) -> None:
    found = load_catalog().module_by_part(part)
    assert found is not None
    assert (found.module, found.soc, found.dla_cores) == (module, soc, dla)


@pytest.mark.parametrize("part", ["p9999-0000", "?", "", "tegra234"])
def test_unknown_or_unknowable_part_numbers_find_nothing(part: str) -> None:
    assert load_catalog().module_by_part(part) is None


@pytest.mark.parametrize(
    ("l4t", "jetpack"),
    [("36.4.3", "6.2"), ("36.4", "6.1"), ("36.4.0", "6.1"), ("35.3.1", "5.1.1"), ("38.2.0", "7.0")],
)
def test_jetpack_release_is_found_by_l4t(l4t: str, jetpack: str) -> None:
    release = load_catalog().release_by_l4t(l4t)
    assert release is not None
    assert release.jetpack == jetpack


@pytest.mark.parametrize("l4t", ["32.7.1", "36", "R36.4.3", ""])
def test_unlisted_l4t_has_no_jetpack_label(l4t: str) -> None:
    assert load_catalog().release_by_l4t(l4t) is None


def test_question_marks_read_as_unknown() -> None:
    thor = next(m for m in load_catalog().modules if m.soc == "tegra264")
    assert thor.part_number is None
    assert thor.power_modes_seen is None
    jp71 = load_catalog().release_by_l4t("38.4.0")
    assert jp71 is not None
    assert jp71.tensorrt is None


def test_compute_capability_comes_from_the_soc() -> None:
    catalog = load_catalog()
    assert catalog.compute_capability_of_soc("tegra234") == "8.7"
    assert catalog.compute_capability_of_soc("tegra194") == "7.2"
    assert catalog.compute_capability_of_soc("tegra999") is None


def test_comments_and_blank_lines_are_skipped() -> None:
    text = "# a comment\n\njetpack\tl4t\tcuda\ttensorrt\tcudnn\tubuntu\tpython\tconfidence\n"
    text += "# another\n6.2\t36.4.3\t12.6\t10.3\t9.3\t22.04\t3.10\tprimary\n"
    (release,) = parse_releases(text)
    assert release.l4t == "36.4.3"


def test_a_ragged_row_is_reported_with_its_number() -> None:
    text = "module\tpart_number\tsoc\n" + "Jetson X\tp0000-0000\n"
    with pytest.raises(CatalogError, match=r"jetson_modules.tsv: data row 2 has 2 cells"):
        parse_modules(text)


def test_a_non_numeric_dla_count_is_reported() -> None:
    header = "module\tpart_number\tsoc\tcompute_capability\tdla_cores\tmemory_gb\t"
    header += "power_modes_seen\tconfidence\n"
    row = "Jetson X\tp0000-0000\ttegra234\t8.7\ttwo\t8\t15W\tprimary\n"
    with pytest.raises(CatalogError, match="expected an integer, got 'two'"):
        parse_modules(header + row)
