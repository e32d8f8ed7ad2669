#!/usr/bin/env python3
"""cap-stress-corpus.py REPO OUTDIR: writes stress captures for
scripts/cap-compare.sh, the corners where two builds of "goroce cap" could
part ways: three mangled copies of every testdata pcap (flipped header
bytes, snap cuts, lengths on the wire past the data), crafted frames
around real RoCEv2 packets (VLAN/QinQ stacks, ICMP and ICMPv6 errors
quoting them, IPv6 with extension headers, IPv4 options, fragments and
bogus lengths, UDP length and port variants, PAUSE/PFC/MPCP frames cut at
every length), every link type the decoders know, gzip, and files cut at
the header and inside records. Deterministic (fixed seeds).

    python3 scripts/cap-stress-corpus.py . /tmp/corpus
    goroce perf write -n 20 -s 65536 --pcap /tmp/corpus/perf.pcapng --pcap-side both
    scripts/cap-compare.sh OLD-BINARY /tmp/out-old /tmp/corpus/*
    scripts/cap-compare.sh NEW-BINARY /tmp/out-new /tmp/corpus/*
    diff -r /tmp/out-old /tmp/out-new
"""
import glob, gzip, os, random, struct, sys

REPO = sys.argv[1]
OUT = sys.argv[2]

def read_pcap(path):
    b = open(path, 'rb').read()
    magic = struct.unpack('<I', b[:4])[0]
    assert magic in (0xa1b2c3d4, 0xa1b23c4d), path
    link = struct.unpack('<I', b[20:24])[0]
    off = 24
    recs = []
    while off + 16 <= len(b):
        s, us, cl, ol = struct.unpack('<IIII', b[off:off+16])
        recs.append([s, us, b[off+16:off+16+cl], ol])
        off += 16 + cl
    return link, recs

def write_pcap(path, link, recs, nanos=False):
    magic = 0xa1b23c4d if nanos else 0xa1b2c3d4
    with open(path, 'wb') as f:
        f.write(struct.pack('<IHHiIII', magic, 2, 4, 0, 0, 262144, link))
        for s, us, data, ol in recs:
            f.write(struct.pack('<IIII', s, us, len(data), max(ol, len(data))))
            f.write(data)

def csum(b):
    if len(b) % 2: b += b'\0'
    s = sum(struct.unpack('!%dH' % (len(b)//2), b))
    while s >> 16: s = (s & 0xffff) + (s >> 16)
    return (~s) & 0xffff

def ipv4(proto, payload, src=b'\x0a\x00\x00\x01', dst=b'\x0a\x00\x00\x02', tos=0, opts=b'', frag=0x4000, tlen=None):
    ihl = (20 + len(opts)) // 4
    tl = 20 + len(opts) + len(payload) if tlen is None else tlen
    h = struct.pack('!BBHHHBBH4s4s', 0x40 | ihl, tos, tl, 1, frag, 64, proto, 0, src, dst) + opts
    return h + payload

def ipv6(nh, payload, ext=b''):
    h = struct.pack('!IHBB', 0x60000000, len(ext) + len(payload), nh, 64) + b'\xfe\x80' + b'\0'*13 + b'\x01' + b'\xfe\x80' + b'\0'*13 + b'\x02'
    return h + ext + payload

def udp(sport, dport, payload, ulen=None):
    return struct.pack('!HHHH', sport, dport, 8 + len(payload) if ulen is None else ulen, 0) + payload

def eth(et, payload, tags=()):
    h = b'\x02\0\0\0\0\x02' + b'\x02\0\0\0\0\x01'
    for tpid, tci in tags:
        h += struct.pack('!HH', tpid, tci)
    return h + struct.pack('!H', et) + payload

def main():
    rnd = random.Random(28)
    pcaps = sorted(glob.glob(os.path.join(REPO, 'testdata/pcaps/*.pcap'))) + [os.path.join(REPO, 'testdata/cap/impaired.pcap')]
    # 1. mangled copies
    for path in pcaps:
        name = os.path.basename(path)[:-5]
        link, recs = read_pcap(path)
        for seed in range(3):
            r = random.Random(sum(map(ord, name)) * 31 + seed)
            out = []
            for s, us, data, ol in recs:
                d = bytearray(data)
                x = r.random()
                if x < 0.35 and len(d):
                    for _ in range(r.randint(1, 3)):
                        i = r.randrange(min(len(d), 96))
                        d[i] = r.randrange(256) if r.random() < 0.5 else d[i] ^ (1 << r.randrange(8))
                elif x < 0.45 and len(d):
                    d = d[:r.randrange(len(d))]
                elif x < 0.5:
                    ol = ol + r.randrange(1, 200)
                out.append([s, us, bytes(d), ol])
            write_pcap(os.path.join(OUT, 'mangle_%s_%d.pcap' % (name, seed)), link, out, nanos=(seed == 2))
    # 2. crafted frames around one real RoCE frame
    link, recs = read_pcap(os.path.join(REPO, 'testdata/pcaps/rc_imm.pcap'))
    frames = [r[2] for r in recs]
    roce = [f for f in frames if len(f) > 42 and f[12:14] == b'\x08\x00' and f[23] == 17 and struct.unpack('!H', f[36:38])[0] == 4791]
    ip4 = [f[14:] for f in roce]
    l4 = [p[20:] for p in ip4]
    crafted = []
    def add(d, ol=0):
        t = len(crafted)
        crafted.append([1700000000 + t // 1000, t % 1000 * 1000, d, ol])
    for i, p in enumerate(ip4[:12]):
        add(eth(0x0800, p))
        add(eth(0x0800, p, tags=[(0x8100, (i % 8) << 13 | 100 + i)]))
        add(eth(0x0800, p, tags=[(0x88a8, 5 << 13 | 7), (0x8100, 3 << 13 | 200)]))
        add(eth(0x0800, p, tags=[(0x9100, 6 << 13 | 9)]))
        add(eth(0x0800, p, tags=[(0x8100, 1 << 13 | 9), (0x8100, 2 << 13 | 10)]))
        # ICMP errors quoting it
        for ty in (3, 11, 0, 8, 12):
            q = p[:min(len(p), 20 + 8 + 64)]
            add(eth(0x0800, ipv4(1, struct.pack('!BBHI', ty, 1, 0, 0) + q, src=b'\x0a\x00\x00\x09')))
        # IPv6 RoCE (ICRC wrong, but a RoCE frame)
        u = l4[i]
        add(eth(0x86dd, ipv6(17, u)))
        add(eth(0x86dd, ipv6(0, u, ext=bytes([17, 0, 1, 4, 0, 0, 0, 0]))))
        add(eth(0x86dd, ipv6(60, u, ext=bytes([17, 0, 1, 9, 0, 0, 0, 0]))))  # option runs past
        add(eth(0x86dd, ipv6(44, u, ext=bytes([17, 0, 0, 0, 0, 0, 0, 1]))))
        add(eth(0x86dd, ipv6(44, u, ext=bytes([17, 0, 0, 8, 0, 0, 0, 1]))))
        add(eth(0x86dd, ipv6(58, struct.pack('!BBHI', 1, 0, 0, 0) + ipv6(17, u)[:200])))
        # IPv4 options, fragments, lengths
        add(eth(0x0800, ipv4(17, u, opts=b'\x01\x01\x01\x00')))
        add(eth(0x0800, ipv4(17, u, opts=b'\x83\x07\x04\x0a\x00\x00\x05\x00')))
        add(eth(0x0800, ipv4(17, u, opts=b'\x89\x07\x08\x0a\x00\x00\x05\x00')))
        add(eth(0x0800, ipv4(17, u, opts=b'\x44\x20\x05\x00')))
        add(eth(0x0800, ipv4(17, u, frag=0x2000)))
        add(eth(0x0800, ipv4(17, u, frag=0x0010)))
        add(eth(0x0800, ipv4(17, u, tlen=0)))
        add(eth(0x0800, ipv4(17, u, tlen=10)))
        add(eth(0x0800, ipv4(17, u, tlen=len(u) + 60)))
        add(eth(0x0800, ipv4(17, u, tlen=len(u) + 10)))
        add(eth(0x0800, ipv4(17, u)), ol=len(u) + 200)
        sport, dport = struct.unpack('!HH', u[:4])
        body = u[8:]
        add(eth(0x0800, ipv4(17, udp(4791, 5000 + i, body))))
        add(eth(0x0800, ipv4(17, udp(sport, 4792, body))))
        add(eth(0x0800, ipv4(17, udp(sport, 4791, body, ulen=4))))
        add(eth(0x0800, ipv4(17, udp(sport, 4791, body, ulen=8))))
        add(eth(0x0800, ipv4(17, udp(sport, 4791, body, ulen=8 + len(body) + 40))))
        add(eth(0x0800, ipv4(17, udp(sport, 4791, body, ulen=8 + len(body) - 8))))
        add(eth(0x0800, ipv4(17, udp(sport, 4791, body[:6]))))
        add(eth(0x0800, ipv4(6, u)))
        add(eth(0x0800, p)[:14 + 20 + 8 + 20])
        add(eth(0x0800, p)[:14 + 20 + 8 + 20], ol=14 + len(p))
        add(eth(0x0800, p)[:14 + 10])
        add(eth(0x0800, ipv4(17, u, tos=(i * 4) & 0xff | 3)))
        add(eth(0x86dd, ipv4(17, u)))
        add(eth(0x0800, ipv6(17, u)))
    # MAC Control
    for tags in ((), ((0x8100, 6 << 13 | 5),)):
        for n in (0, 1, 2, 3, 4, 10, 19, 20, 46):
            add(eth(0x8808, (struct.pack('!HH', 0x0001, 0x1234) + b'\0' * 42)[:n], tags=tags))
            add(eth(0x8808, (struct.pack('!HH', 0x0101, 0x0089) + struct.pack('!8H', *range(8)) + b'\0' * 26)[:n], tags=tags))
            add(eth(0x8808, (struct.pack('!HH', 0x0101, 0x0008) + struct.pack('!8H', 0, 0, 0, 5, 0, 0, 0, 0) + b'\0' * 26)[:n], tags=tags))
            add(eth(0x8808, (struct.pack('!HIBH', 0x0005, 99, 1, 2) + b'\0' * 40)[:n], tags=tags))
            add(eth(0x8808, (struct.pack('!H', 0x0222) + b'\0' * 44)[:n], tags=tags))
        add(eth(0x8808, struct.pack('!HH', 0x0101, 0x00ff) + struct.pack('!8H', *[0] * 8), tags=tags))
        add(eth(0x8808, struct.pack('!HH', 0x0001, 0), tags=tags))
    add(eth(0x0806, b'\0' * 28))
    write_pcap(os.path.join(OUT, 'crafted.pcap'), 1, crafted)
    # 3. other link types
    def relink(lt, fn, name):
        out = []
        for r in recs:
            f = r[2]
            if f[12:14] != b'\x08\x00':
                continue
            out.append([r[0], r[1], fn(f), r[3] - len(f) + len(fn(f))])
        write_pcap(os.path.join(OUT, name), lt, out)
    relink(101, lambda f: f[14:], 'link_raw.pcap')
    relink(228, lambda f: f[14:], 'link_ipv4.pcap')
    relink(229, lambda f: ipv6(17, f[34:]), 'link_ipv6.pcap')
    relink(113, lambda f: struct.pack('!HHH', 0, 1, 6) + f[6:12] + b'\0\0' + f[12:14] + f[14:], 'link_sll.pcap')
    relink(276, lambda f: f[12:14] + b'\0\0' + struct.pack('!IHBB', 3, 1, 0, 6) + f[6:12] + b'\0\0' + f[14:], 'link_sll2.pcap')
    relink(0, lambda f: struct.pack('<I', 2) + f[14:], 'link_null.pcap')
    relink(108, lambda f: struct.pack('!I', 2) + f[14:], 'link_loop.pcap')
    relink(147, lambda f: f, 'link_user0.pcap')
    # 4. gzip
    for n in ('rc_imm', 'read_bw_s8'):
        data = open(os.path.join(REPO, 'testdata/pcaps/%s.pcap' % n), 'rb').read()
        open(os.path.join(OUT, 'gz_%s.pcap.gz' % n), 'wb').write(gzip.compress(data, mtime=0))
    # 5. cut files
    data = open(os.path.join(REPO, 'testdata/pcaps/read_bw_s8.pcap'), 'rb').read()
    for n in (0, 3, 23, 24, 30, 5000, len(data) - 3):
        open(os.path.join(OUT, 'cut_%d.pcap' % n), 'wb').write(data[:n])
    open(os.path.join(OUT, 'notcap.pcap'), 'wb').write(b'hello, not a capture\n' * 3)

main()
