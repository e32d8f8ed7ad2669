#!/usr/bin/env python3
"""Write ethertype_empty.pcap: one RC RDMA WRITE ONLY per EtherType that tshark 4.0.17 has a
dissector for (heur.go's etherTypes), each with a 2-byte payload = the EtherType, then its 2 pad
bytes (zero): tshark's EtherType-over-IB heuristic sees an EtherType, bytes 2-3 zero, and an
empty frame after them. ib_write_lat's default 2-byte WRITEs (00 xx, xx the iteration) are such
packets. Deterministic; valid ICRCs (as ../shared/rxe/lib/icrc_check.py computes them).

Golden:  LC_ALL=C TZ=UTC WIRESHARK_CONFIG_DIR=$(mktemp -d) tshark -r ethertype_empty.pcap \
           -Y infiniband -T fields -E header=y -E separator=/t -E occurrence=a -E aggregator=, \
           -E quote=n $(sed 's/^/-e /' ../../../testdata/tshark/FIELDS) > ethertype_empty.tshark.txt
"""
import re, struct, zlib

src = open("../heur.go").read()
ets = [int(x, 16) for x in re.findall(r"0x[0-9a-f]+", re.search(r"var etherTypes = \[\.\.\.\]uint16\{(.*?)\}", src, re.S).group(1))]


def ip_csum(h):
    s = sum(struct.unpack("!%dH" % (len(h) // 2), h))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def icrc(ip, udp, transport):
    ip, udp, t = bytearray(ip), bytearray(udp), bytearray(transport)
    ip[1] = 0xFF; ip[8] = 0xFF; ip[10:12] = b"\xff\xff"
    udp[6:8] = b"\xff\xff"
    t[4] = 0xFF
    return struct.pack("<I", zlib.crc32(b"\xff" * 8 + bytes(ip) + bytes(udp) + bytes(t)) & 0xFFFFFFFF)


with open("ethertype_empty.pcap", "wb") as out:
    out.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
    for i, et in enumerate(ets):
        bth = bytes([0x0A, 0x20, 0xFF, 0xFF, 0, 0, 0, 0x15, 0x80, 0, 0, i + 1])  # WRITE ONLY, pad 2
        reth = struct.pack("!QII", 0x1000, 0x42, 2)
        transport = bth + reth + struct.pack("!H", et) + b"\0\0"
        ulen = 8 + len(transport) + 4
        udp = struct.pack("!HHHH", 4791, 4791, ulen, 0)
        ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + ulen, 0, 0x4000, 64, 17, 0,
                                   bytes([10, 77, 0, 1]), bytes([10, 77, 0, 2])))
        ip[10:12] = struct.pack("!H", ip_csum(bytes(ip)))
        frame = (bytes.fromhex("525400770002525400770001") + b"\x08\x00" + bytes(ip) + udp + transport +
                 icrc(bytes(ip), udp, transport))
        out.write(struct.pack("<IIII", i, 0, len(frame), len(frame)) + frame)
