#!/usr/bin/env python3
"""The demo behind `make demo`: see scripts/demo.sh."""
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'tests'))
from conftest import Harness  # noqa: E402


def main() -> int:
    binary, profile, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    with Harness('--tcp', '127.0.0.1:0', '--scanner') as h:
        print(f'emulated controller {h.address} listening on {h.device_spec}')
        cmd = [binary, 'advertise', '--device', h.device_spec, '--profile', profile, '--duration', str(seconds)]
        print('$ ' + ' '.join(cmd), flush=True)
        proc = subprocess.Popen(cmd)
        start, shown = time.monotonic(), 0
        try:
            while proc.poll() is None:
                time.sleep(1)
                events = [e for e in h.adv_events() if e.get('ibeacon')]
                new = events[shown:]
                shown = len(events)
                if new:
                    b = new[-1]['ibeacon']
                    print(f'  phone sees: iBeacon {b["uuid"]} major {b["major"]} minor {b["minor"]} '
                          f'measured power {b["power"]} dBm — {len(new)} advertisements in the last second, '
                          f'from {new[-1]["address"]}', flush=True)
        except KeyboardInterrupt:
            proc.send_signal(signal.SIGINT)
        code = proc.wait()
        print(f'ibeacon exited with {code} after {time.monotonic() - start:.1f} s')
        return code


if __name__ == '__main__':
    sys.exit(main())
