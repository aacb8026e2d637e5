"""WordNet synonyms for search_schema: parsing the database files, expanding question words, the
cached index, and searches with and without WordNet. A tiny WordNet-format database is written
here (wndb(5): byte offsets, hex word counts, pointers); one test reads the real files if installed."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from flexsql.tools.engines import SourceRegistry, open_source
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.search import synonyms as syn
from flexsql.tools.search.ranking import SearchSchema, search_schema

# name -> (lemmas, [(pointer symbol, target name)], gloss); pointers are written both ways as WordNet does
NOUNS: dict[str, tuple[list[str], list[tuple[str, str]], str]] = {
    "drug": (["drug"], [("~", "medicine")], "a substance used as a medicine"),
    "medicine": (
        ["medicine", "medication", "medicament", "medicinal_drug"],
        [("@", "drug")],
        "something that treats or prevents or alleviates the symptoms of disease",
    ),
    "person": (["person", "individual", "someone"], [("~", "participant"), ("~", "worker")], "a human being"),
    "participant": (["participant"], [("@", "person")], "someone who takes part in an activity"),
    "worker": (
        ["worker"],
        [("@", "person"), ("~", "employee")],
        "a person who works at a specific occupation",
    ),
    "employee": (["employee"], [("@", "worker")], "a worker who is hired to perform a job"),
    "student": (
        ["student", "pupil", "educatee"],
        [],
        "a learner who is enrolled in an educational institution",
    ),
    "eye_pupil": (["pupil"], [], "the contractile aperture in the center of the iris of the eye"),
    "movie": (["movie", "film", "motion_picture"], [], "a form of entertainment"),
    "mouse": (["mouse"], [], "any of numerous small rodents"),
}
VERBS: dict[str, tuple[list[str], list[tuple[str, str]], str]] = {
    "ship": (["ship", "forward", "send"], [], "transport commercially"),
}
# lemma -> its synsets, most frequent sense first
NOUN_SENSES = {
    "drug": ["drug"],
    "medicine": ["medicine"],
    "medication": ["medicine"],
    "medicament": ["medicine"],
    "medicinal_drug": ["medicine"],
    "person": ["person"],
    "individual": ["person"],
    "someone": ["person"],
    "participant": ["participant"],
    "worker": ["worker"],
    "employee": ["employee"],
    "student": ["student"],
    "pupil": ["student", "eye_pupil"],
    "educatee": ["student"],
    "movie": ["movie"],
    "film": ["movie"],
    "motion_picture": ["movie"],
    "mouse": ["mouse"],
}
VERB_SENSES = {"ship": ["ship"], "forward": ["ship"], "send": ["ship"]}
LICENCE = "  1 This software and database is being provided to you, the LICENSEE, by Princeton University\n"


def _write_pos(folder: Path, pos: str, synsets: dict, senses: dict[str, list[str]], letter: str) -> None:
    # offsets are byte positions of each line; every offset field has 8 digits, so line lengths do not
    # depend on the offsets and one pass over dummy offsets finds them all
    def line(name: str, offsets: dict[str, int]) -> str:
        lemmas, pointers, gloss = synsets[name]
        words = " ".join(f"{w} 0" for w in lemmas)
        ptrs = " ".join(f"{sym} {offsets[target]:08d} {letter} 0000" for sym, target in pointers)
        return (
            f"{offsets[name]:08d} 03 {letter} {len(lemmas):02x} {words} {len(pointers):03d}"
            + (f" {ptrs}" if ptrs else "")
            + f" | {gloss}  \n"
        )

    dummy = dict.fromkeys(synsets, 0)
    offsets, at = {}, len(LICENCE.encode())
    for name in synsets:
        offsets[name] = at
        at += len(line(name, dummy).encode())
    (folder / f"data.{pos}").write_text(
        LICENCE + "".join(line(n, offsets) for n in synsets), encoding="utf-8"
    )
    rows = []
    for lemma in sorted(senses):
        targets = senses[lemma]
        rows.append(
            f"{lemma} {letter} {len(targets)} 0 {len(targets)} 0 "
            + " ".join(f"{offsets[t]:08d}" for t in targets)
            + "  \n"
        )
    (folder / f"index.{pos}").write_text(LICENCE + "".join(rows), encoding="utf-8")


@pytest.fixture
def wordnet_files(tmp_path: Path) -> Path:
    folder = tmp_path / "wordnet"
    folder.mkdir()
    _write_pos(folder, "noun", NOUNS, NOUN_SENSES, "n")
    _write_pos(folder, "verb", VERBS, VERB_SENSES, "v")
    (folder / "noun.exc").write_text("mice mouse\n", encoding="utf-8")
    return folder


@pytest.fixture
def use_wordnet(wordnet_files: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """search_schema reads the fixture WordNet (a cache dir of its own, so the index is built here)."""
    monkeypatch.setenv(syn.ENV, str(wordnet_files))
    monkeypatch.setenv("FLEXSQL_CACHE_DIR", str(tmp_path / "cache"))
    assert syn.wordnet(wait=True) is not None
    return wordnet_files


def _relations(folder: Path) -> dict[str, list[syn.Related]]:
    return syn.relations(folder)[0]


def test_parses_synonyms_broader_and_narrower_words(wordnet_files: Path) -> None:
    related = _relations(wordnet_files)
    medication = {(r.word, r.relation) for r in related["medication"]}
    assert {("medicine", "s"), ("medicament", "s"), ("medicinal drug", "s"), ("drug", "b")} <= medication
    assert ("medicine", "n") in {(r.word, r.relation) for r in related["drug"]}
    assert ("employee", "n") in {(r.word, r.relation) for r in related["worker"]}
    assert ("person", "b") in {(r.word, r.relation) for r in related["participant"]}
    # senses keep WordNet's order: a pupil is a student first, the eye's aperture second
    assert [(r.word, r.sense) for r in related["pupil"] if r.word == "student"] == [("student", 0)]
    assert all(r.pos == "v" for r in related["forward"])
    assert "mouse" not in related  # no related words at all: no row


def test_index_is_built_once_private_and_reused(use_wordnet: Path, tmp_path: Path) -> None:
    wn = syn.wordnet()
    assert wn is not None
    folder = wn.path.parent
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(wn.path.stat().st_mode) == 0o600
    assert folder.parent == tmp_path / "cache"
    built = wn.path.stat().st_mtime_ns
    syn._LOADED.clear()  # a new process: it finds the file and does not rebuild it
    again = syn.wordnet()
    assert again is not None and again.path == wn.path and again.path.stat().st_mtime_ns == built
    assert not list(folder.glob("*.partial"))


def test_lookups_find_dictionary_forms(use_wordnet: Path) -> None:
    wn = syn.wordnet()
    assert wn is not None
    assert "drug" in {r.word for r in wn.related("medications")}  # regular plural
    assert "student" in {r.word for r in wn.related("Pupils")}
    assert "movie" in {r.word for r in wn.related("motion picture")}  # a collocation is a lemma of its own
    assert wn.related("mice") == []  # irregular form found, but the mouse relates to nothing
    assert wn.related("xylophonist") == []


def test_phrases_longest_first() -> None:
    phrases = syn.question_phrases("Which motion picture won?", max_words=2)
    assert phrases[0] == ("which motion", 0, 2)
    assert ("motion picture", 1, 2) in phrases and ("won", 3, 1) in phrases


CLINIC = """
CREATE TABLE person (person_id INTEGER, gender_concept_id INTEGER, year_of_birth INTEGER);
CREATE TABLE drug_exposure (drug_exposure_id INTEGER, person_id INTEGER, drug_concept_id INTEGER,
                            drug_exposure_start_date DATE, quantity DOUBLE);
CREATE TABLE visit_occurrence (visit_occurrence_id INTEGER, person_id INTEGER, visit_start_date DATE);
CREATE TABLE care_site (care_site_id INTEGER, care_site_name VARCHAR, place_of_service VARCHAR);
CREATE TABLE observation_period (observation_period_id INTEGER, person_id INTEGER, period_type VARCHAR);
CREATE TABLE location (location_id INTEGER, city VARCHAR, state VARCHAR, zip VARCHAR);
CREATE TABLE provider (provider_id INTEGER, provider_name VARCHAR, specialty VARCHAR);
CREATE TABLE cost (cost_id INTEGER, total_charge DOUBLE, paid_by_payer DOUBLE);
"""


@pytest.fixture
def clinic(tmp_path: Path) -> ToolContext:
    import duckdb

    path = tmp_path / "clinic.duckdb"
    conn = duckdb.connect(str(path))
    conn.execute(CLINIC)
    conn.close()
    return ToolContext(sources=SourceRegistry([open_source(f"duckdb:///{path}", name="clinic")]))


def test_question_words_reach_schema_words_through_wordnet(use_wordnet: Path, clinic: ToolContext) -> None:
    result = search_schema(
        clinic, SearchSchema(query="How many medications did each participant take?", limit=3)
    )
    assert result.tables[0].table.endswith("drug_exposure")
    assert "'medications' ~ 'drug' (WordNet)" in "; ".join(result.tables[0].why)
    assert result.tables[1].table.endswith(".person")  # 'participant' ~ 'person', broader (WordNet)
    assert "'participant' ~ 'person' (WordNet)" in "; ".join(result.tables[1].why)


def test_a_word_the_question_uses_counts_more_than_a_synonym(use_wordnet: Path, clinic: ToolContext) -> None:
    # 'person' is in the question and in the catalog: WordNet adds nothing for it, and the table named
    # by the question's own word ranks first
    result = search_schema(clinic, SearchSchema(query="person with the most medications", limit=3))
    assert result.tables[0].table.endswith(".person")
    assert all("~ 'person'" not in w for t in result.tables for w in t.why)


def test_verb_senses_are_not_used(use_wordnet: Path, clinic: ToolContext) -> None:
    wn = syn.wordnet()
    assert wn is not None and "ship" in {r.word for r in wn.related("forward")}
    result = search_schema(clinic, SearchSchema(query="forward the medications", limit=8))
    assert all("'forward' ~" not in w for t in result.tables for w in t.why)


def test_without_wordnet_nothing_is_expanded(
    clinic: ToolContext, monkeypatch: pytest.MonkeyPatch, wordnet_files: Path
) -> None:
    monkeypatch.setenv(syn.ENV, "off")
    assert syn.wordnet_dir() is None and syn.wordnet() is None
    result = search_schema(
        clinic, SearchSchema(query="How many medications did each participant take?", limit=3)
    )
    assert all("WordNet" not in w for t in result.tables for w in t.why)
    monkeypatch.setenv(syn.ENV, str(wordnet_files / "missing"))  # a folder without the files: same
    assert syn.wordnet_dir() is None


def test_unreadable_files_mean_no_synonyms_not_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clinic: ToolContext
) -> None:
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "data.noun").write_text("00000000 03 n zz not-hex 0 000 | broken\n", encoding="utf-8")
    (folder / "index.noun").write_text("word n 1 0 1 0 00000000\n", encoding="utf-8")
    monkeypatch.setenv(syn.ENV, str(folder))
    monkeypatch.setenv("FLEXSQL_CACHE_DIR", str(tmp_path / "cache"))
    assert syn.wordnet(wait=True) is None
    assert search_schema(clinic, SearchSchema(query="medications", limit=3)).tables is not None


def test_first_use_builds_in_the_background(
    wordnet_files: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(syn.ENV, str(wordnet_files))
    monkeypatch.setenv("FLEXSQL_CACHE_DIR", str(tmp_path / "fresh-cache"))
    first = syn.wordnet()  # answers at once: None until the index is there
    thread = syn._BUILDS[wordnet_files]
    thread.join(timeout=30)
    assert first is None or first.path.exists()
    assert syn.wordnet() is not None


REAL = syn.DEBIAN_DIR


@pytest.mark.integration
@pytest.mark.skipif(
    not (REAL / "data.noun").is_file(),
    reason=f"WordNet database files are not installed at {REAL} (Debian/Ubuntu: "
    "apt-get install wordnet-base; .ci/run installs it)",
)
def test_real_wordnet_relates_medication_to_drug(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(syn.ENV, str(REAL))
    monkeypatch.setenv("FLEXSQL_CACHE_DIR", os.environ.get("FLEXSQL_CACHE_DIR", str(tmp_path)))
    wn = syn.wordnet(wait=True)
    assert wn is not None
    assert ("drug", "b") in {(r.word, r.relation) for r in wn.related("medications")}
    assert "student" in {r.word for r in wn.related("pupils")}
    assert "customer" in {r.word for r in wn.related("clients")}
