"""Validates CDI specs (YAML or JSON) against the official CDI JSON schema in tests/cdi-schema/."""

import json
import os
import sys

import jsonschema
import yaml

from . import TESTS_DIR

SCHEMA_DIR = os.path.join(TESTS_DIR, "cdi-schema")


def _validator():
    with open(os.path.join(SCHEMA_DIR, "schema.json")) as f:
        schema = json.load(f)
    resolver = jsonschema.RefResolver(base_uri="file://" + os.path.abspath(SCHEMA_DIR) + "/", referrer=schema)
    return jsonschema.Draft7Validator(schema, resolver=resolver)


VALIDATOR = _validator()


def errors(text):
    """Schema violations of a spec given as YAML or JSON text ([] when valid)."""
    doc = yaml.safe_load(text)
    return [f"{'/'.join(map(str, e.path))}: {e.message}" for e in VALIDATOR.iter_errors(doc)]


if __name__ == "__main__":
    bad = 0
    for path in sys.argv[1:]:
        errs = errors(open(path).read())
        for e in errs:
            print(f"{path}: {e}")
        bad += bool(errs)
    sys.exit(1 if bad else 0)
