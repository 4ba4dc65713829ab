"""The paced H4 controller the live benchmarks share (scan_live.py, monitor_live.py,
mqtt_monitor.py): `ibeacon` connects to it over TCP on a free loopback port, it answers every
HCI command with a successful Command Complete (an address for Read BD_ADDR, no LE features so
the scan is legacy), and the benchmark feeds it LE Advertising Report events at a fixed rate.

    proc, conn = start(binary, 'monitor', '--json', ...)    # returns once the scan is on
    sent = pace(conn, rate, seconds, lambda i, n: ...)       # events i..i+n-1 as bytes
    cpu, wall, reports, peak_kb = measure(proc, conn, rate, seconds, chunk)
    cpu_ns(proc.pid), rss_kb(proc.pid, 'VmHWM')
"""
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path


def cpu_ns(pid):
    """CPU time of every thread of `pid` (/proc/PID/task/*/schedstat), in nanoseconds."""
    return sum(int((t / 'schedstat').read_text().split()[0]) for t in Path(f'/proc/{pid}/task').iterdir())


def rss_kb(pid, field='VmRSS'):
    """A memory figure of /proc/PID/status in kB: VmRSS now, VmHWM the peak."""
    return int(next(line for line in Path(f'/proc/{pid}/status').read_text().splitlines()
                    if line.startswith(field + ':')).split()[1])


def event(payload, address, rssi):
    """An H4 LE Advertising Report event with one ADV_NONCONN_IND report (random address)."""
    body = bytes([0x02, 1, 0x03, 0x01]) + address + bytes([len(payload)]) + payload + bytes([rssi & 0xFF])
    return bytes([0x04, 0x3E, len(body)]) + body


def ibeacon_payloads(store, count):
    """Advertising data of `count` iBeacons of UUID `store`, major 12, minor 0..count-1, -59 dBm."""
    return [bytes([0x02, 0x01, 0x06, 0x1A, 0xFF, 0x4C, 0x00, 0x02, 0x15]) + store.bytes
            + struct.pack('>HHb', 12, i, -59) for i in range(count)]


def answer_commands(conn, scanning):
    """Answers every HCI command on `conn` with a successful Command Complete (an address for
    Read BD_ADDR, no LE features so the scan is legacy); sets `scanning` at LE Set Scan Enable on."""
    buf = b''
    while True:
        data = conn.recv(4096)
        if not data:
            return
        buf += data
        while len(buf) >= 4 and len(buf) >= 4 + buf[3]:
            opcode, plen = struct.unpack_from('<HB', buf, 1)
            params = buf[4:4 + plen]
            buf = buf[4 + plen:]
            ret = b'\x00'
            if opcode == 0x1009:
                ret += bytes([0xF5, 0xF4, 0xF3, 0xF2, 0xF1, 0xF0])
            elif opcode == 0x2003:
                ret += bytes(8)
            body = bytes([1]) + struct.pack('<H', opcode) + ret
            conn.sendall(bytes([0x04, 0x0E, len(body)]) + body)
            if opcode == 0x200C and params[:1] == b'\x01':
                scanning.set()


def start(binary, command, *args, **popen):
    """Runs `binary command --device tcp:127.0.0.1:PORT args…` against the controller and returns
    (process, connection) once the scan is on; exits with ibeacon's stderr when it does not come
    on within 10 s. `popen` goes to subprocess.Popen (stdout, stderr, text)."""
    server = socket.socket()
    server.bind(('127.0.0.1', 0))
    server.listen(1)
    port = server.getsockname()[1]
    proc = subprocess.Popen([binary, command, '--device', f'tcp:127.0.0.1:{port}', *args], **popen)
    conn, _ = server.accept()
    server.close()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    scanning = threading.Event()
    threading.Thread(target=answer_commands, args=(conn, scanning), daemon=True).start()
    if not scanning.wait(10):
        said = proc.stderr.read() if proc.stderr is not None else ''
        said = said.decode() if isinstance(said, bytes) else said
        raise SystemExit('ibeacon did not start scanning: ' + said[-300:])
    return proc, conn


def pace(conn, rate, seconds, chunk, first=0):
    """Sends `rate` events a second for `seconds`, in 1 ms slots: `chunk(i, n)` gives the bytes
    of events first+i … first+i+n-1. Returns how many it sent."""
    start_time = time.monotonic()
    sent = 0
    while (elapsed := time.monotonic() - start_time) < seconds:
        due = int(elapsed * rate)
        if due > sent:
            conn.sendall(chunk(first + sent, due - sent))
            sent = due
        time.sleep(0.001)
    return sent


def measure(proc, conn, rate, seconds, chunk, warm_up=2):
    """Feeds `rate` events a second (`pace`), measures the CPU time of `proc` over `seconds` after
    `warm_up` seconds of steady feeding, then stops it. Returns (CPU ns, wall seconds, events sent
    while measured, peak RSS kB)."""
    warm = pace(conn, rate, warm_up, chunk)
    c0, t0 = cpu_ns(proc.pid), time.monotonic()
    sent = pace(conn, rate, seconds, chunk, first=warm)
    c1, t1 = cpu_ns(proc.pid), time.monotonic()
    peak_kb = rss_kb(proc.pid, 'VmHWM')
    proc.terminate()
    proc.wait(timeout=10)
    conn.close()
    return c1 - c0, t1 - t0, sent, peak_kb
