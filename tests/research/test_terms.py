"""Story terms: acronyms written in a headline and those its capitalised names spell."""

from __future__ import annotations

from research.terms import acronym_term, acronyms, story_terms


def test_written_acronyms_and_the_names_that_spell_them() -> None:
    found = acronyms("BoE's Carney says MPs and the UK economy are not close to overheating")
    assert found.written == {"boe", "mps", "uk"}
    spelled = acronyms("Bank of England has no control over soaring house prices").spelled
    assert "boe" in spelled, "function words between the names may count"
    assert "be" in spelled, "or not"
    assert acronyms("American Eagle Outfitters to Release Quarterly Earnings").spelled >= {"ae", "aeo"}
    # Either side becomes the term the written word gets in the headline's own terms, with its rarity.
    term = acronym_term("mps", "en")
    assert term is not None
    assert term[0] in story_terms("MPs question Carney", "en").terms
    assert term[1] == story_terms("MPs question Carney", "en").rarity[term[0]]


def test_what_is_not_an_acronym() -> None:
    # A headline set in capitals: every short word would look like an acronym.
    assert acronyms("GRANDMOTHER KILLED BY DRUNK DRIVER IN HIT AND RUN IN QUEENS").written == frozenset()
    # Times of day and single capitals are no acronyms; "The" starts no name.
    assert acronyms("Climber found at 8:05 AM, rescue team says").written == frozenset()
    assert "tv" not in acronyms("The Voice: blind auditions continue").spelled
    # A possessive does not break a name: "McDonald's Corp" is one run of names.
    assert "mc" in acronyms("McDonald's Corp shares fall").spelled
    assert acronyms("トヨタ、リコール200万台") == acronyms("all lower case, no names")
