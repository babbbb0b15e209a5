"""Story terms: acronyms written in a headline and those its capitalised names spell."""

from __future__ import annotations

from research.terms import acronyms, story_terms


def test_written_acronyms_and_the_names_that_spell_them() -> None:
    found = acronyms("BoE's Carney says MPs and the UK economy are not close to overheating", "en")
    assert found.written == {story_terms("boe", "en").terms[0], story_terms("mps", "en").terms[0], "uk"}
    spelled = acronyms("Bank of England has no control over soaring house prices", "en").spelled
    assert "boe" in spelled, "function words between the names may count"
    assert "be" in spelled, "or not"
    assert acronyms("American Eagle Outfitters to Release Quarterly Earnings", "en").spelled.keys() >= {"ae", "aeo"}


def test_what_is_not_an_acronym() -> None:
    # A headline set in capitals: every short word would look like an acronym.
    assert acronyms("GRANDMOTHER KILLED BY DRUNK DRIVER IN HIT AND RUN IN QUEENS", "en").written == frozenset()
    # Times of day, function words and single capitals are no acronyms; "The" starts no name.
    assert acronyms("Climber found at 8:05 AM, rescue team says", "en").written == frozenset()
    assert "tv" not in acronyms("The Voice: blind auditions continue", "en").spelled
    # A possessive does not break a name: "McDonald's Corp" is one run of names.
    assert "mc" in acronyms("McDonald's Corp shares fall", "en").spelled
