"""Tests of the schema formats: parsing, canonical forms, compatibility."""
