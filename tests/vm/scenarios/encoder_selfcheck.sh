# shellcheck shell=bash
# Scenario encoder_selfcheck: sourced by tests/vm/guest-test.sh (helpers in tests/vm/lib.sh).

# The test's own encoder against bytes written out by hand from the layout (FIELD.md, Apple's
# Proximity Beacon Specification): a wrong encoder here would make later checks meaningless.
scenario_encoder_selfcheck() {
  printf '%s\n' '{"name": "selfcheck", "proximityUUID": "01122334-4556-6778-899a-abbccddeeff0",
    "major": 258, "minor": 772, "measuredPower": -59}' > "$WORK/selfcheck.json"
  local out
  out=$(encode_profile "$WORK/selfcheck.json" 2>&1) || { fail "encode test profile" "assignments" "$out"; return; }
  eval "$out"
  #          flags     len  type company ibeacon  UUID 01122334-4556-6778-899A-ABBCCDDEEFF0          major minor power(-59)
  check_eq "test encoder: 30 bytes" \
    "02 01 06 1A FF 4C 00 02 15 01 12 23 34 45 56 67 78 89 9A AB BC CD DE EF F0 01 02 03 04 C5" "$P_ADV"
}
