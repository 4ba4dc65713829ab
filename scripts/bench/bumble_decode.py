#!/usr/bin/env python3
"""The same decoding work as ibeacon-bench, done by Bumble's Python HCI parser: every event
packet of the capture through `HCI_Packet.from_bytes`, every report of every LE Advertising
Report, its AD structures through `AdvertisingData.from_bytes`, and the iBeacon fields.
Prints one JSON object like ibeacon-bench.

usage: bumble_decode.py CAPTURE.btsnoop [REPEAT]
"""
import json
import struct
import sys
import time

from bumble import hci
from bumble.core import AdvertisingData


def load_events(path):
    with open(path, 'rb') as fh:
        data = fh.read()
    assert data[:8] == b'btsnoop\0'
    offset, events = 16, []
    while offset + 24 <= len(data):
        orig, incl, flags, _drops, _ts = struct.unpack_from('>IIIIq', data, offset)
        offset += 24
        packet = data[offset:offset + incl]
        offset += incl
        if packet and packet[0] == 0x04 and flags & 1:
            events.append(packet)
    return events


def decode(events):
    reports = beacons = 0
    for packet in events:
        event = hci.HCI_Packet.from_bytes(packet)
        if not isinstance(event, hci.HCI_LE_Advertising_Report_Event):
            continue
        for report in event.reports:
            reports += 1
            ad = AdvertisingData.from_bytes(report.data)
            for manufacturer in ad.get_all(AdvertisingData.MANUFACTURER_SPECIFIC_DATA):
                company, payload = manufacturer if isinstance(manufacturer, tuple) else (None, manufacturer)
                if company == 0x004C and len(payload) == 23 and payload[0] == 0x02 and payload[1] == 0x15:
                    # The fields a phone uses, unpacked as ibeacon does (the values are not needed here).
                    _ = (payload[2:18], struct.unpack('>HHb', payload[18:23]))
                    beacons += 1
    return reports, beacons


def main():
    events = load_events(sys.argv[1])
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    best = float('inf')
    for _ in range(repeats):
        start = time.perf_counter()
        reports, beacons = decode(events)
        best = min(best, time.perf_counter() - start)
    print(json.dumps({'events': len(events), 'reports': reports, 'ibeacons': beacons, 'seconds': best,
                      'reportsPerSecond': int(reports / best), 'nanosecondsPerReport': int(1e9 * best / reports)}))


if __name__ == '__main__':
    main()
