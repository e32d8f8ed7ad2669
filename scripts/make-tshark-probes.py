#!/usr/bin/env python3
"""Write the crafted probe pcaps in testdata/tshark/probe/ (run by hand; outputs are committed).

They exercise what the rdma_rxe captures in testdata/pcaps/ do not: every BTH opcode, BTH flag
bits, AETH syndromes, short SEND payloads (tshark's RPC-over-RDMA heuristic throws on them),
IPv6, ECN, VLAN, ICMP-quoted RoCE, CNP, FLUSH/ATOMIC WRITE, a truncated BTH and a
backwards timestamp. See testdata/tshark/FORMATS.md for what tshark 4.0 prints for them.

  python3 scripts/make-tshark-probes.py [OUTDIR]     (default testdata/tshark/probe)

Deterministic: same bytes every run (fixed timestamps, no randomness). Every RoCEv2 packet gets a
correct ICRC computed the way rxe does (CRC-32 over the masked pseudo-header, little-endian).
"""
import os
import struct
import sys
import zlib

MAC_A = bytes.fromhex("525400770002")
MAC_B = bytes.fromhex("525400770003")
IP_A = bytes([10, 77, 0, 2])
IP_B = bytes([10, 77, 0, 3])
IP6_A = bytes.fromhex("fd00004d000000000000000000000002")
IP6_B = bytes.fromhex("fd00004d000000000000000000000003")
ROCE_PORT = 4791

T0 = 1795311447  # seconds; same epoch as the rxe captures


def csum16(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def ipv4(payload, proto=17, tos=0, src=IP_B, dst=IP_A, ident=0x1234, ttl=64):
    hdr = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, tos, 20 + len(payload), ident, 0x4000,
                                ttl, proto, 0, src, dst))
    hdr[10:12] = struct.pack("!H", csum16(bytes(hdr)))
    return bytes(hdr) + payload


def ipv6(payload, nxt=17, tclass=0, flow=0, src=IP6_B, dst=IP6_A, hlim=64):
    vtf = (6 << 28) | (tclass << 20) | flow
    return struct.pack("!IHBB16s16s", vtf, len(payload), nxt, hlim, src, dst) + payload


def udp(payload, sport=49152, dport=ROCE_PORT):
    return struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload  # rxe sends csum 0


def eth(payload, etype=0x0800, vlan=None, src=MAC_B, dst=MAC_A):
    if vlan is not None:
        return dst + src + struct.pack("!HH", 0x8100, vlan) + struct.pack("!H", etype) + payload
    return dst + src + struct.pack("!H", etype) + payload


def bth(opcode, destqp=0x000102, psn=0x0A0B0C, se=0, m=0, pad=0, tver=0, pkey=0xFFFF,
        byte4=0, a=0, resv7=0):
    b1 = (se << 7) | (m << 6) | (pad << 4) | tver
    return struct.pack("!BBHB", opcode, b1, pkey, byte4) + destqp.to_bytes(3, "big") + \
        bytes([(a << 7) | resv7]) + psn.to_bytes(3, "big")


def icrc_v4(ip_packet):
    """ip_packet: IPv4 header + UDP + BTH... without ICRC (lengths already include the 4 ICRC
    bytes). Returns the 4 ICRC bytes."""
    ihl = (ip_packet[0] & 0x0F) * 4
    iph = bytearray(ip_packet[:ihl])
    iph[1] = 0xFF
    iph[8] = 0xFF
    iph[10:12] = b"\xff\xff"
    udph = bytearray(ip_packet[ihl:ihl + 8])
    udph[6:8] = b"\xff\xff"
    rest = bytearray(ip_packet[ihl + 8:])
    if len(rest) > 4:
        rest[4] = 0xFF
    return struct.pack("<I", zlib.crc32(b"\xff" * 8 + bytes(iph) + bytes(udph) + bytes(rest)) & 0xFFFFFFFF)


def icrc_v6(ip_packet):
    iph = bytearray(ip_packet[:40])
    iph[0] |= 0x0F                  # traffic class and flow label; the version stays (rxe_icrc.c)
    iph[1:4] = b"\xff\xff\xff"
    iph[7] = 0xFF                   # hop limit
    udph = bytearray(ip_packet[40:48])
    udph[6:8] = b"\xff\xff"
    rest = bytearray(ip_packet[48:])
    if len(rest) > 4:
        rest[4] = 0xFF
    return struct.pack("<I", zlib.crc32(b"\xff" * 8 + bytes(iph) + bytes(udph) + bytes(rest)) & 0xFFFFFFFF)


def roce4(ib, sport=49152, tos=0, src=IP_B, dst=IP_A, vlan=None, icrc=True):
    """Ethernet/IPv4/UDP frame carrying ib (BTH + ext headers + payload) + ICRC."""
    if not icrc:
        return eth(ipv4(udp(ib, sport=sport), tos=tos, src=src, dst=dst), vlan=vlan)
    placeholder = ipv4(udp(ib + b"\0\0\0\0", sport=sport), tos=tos, src=src, dst=dst)
    crc = icrc_v4(placeholder[:-4])
    return eth(placeholder[:-4] + crc, vlan=vlan)


def roce6(ib, sport=49152, tclass=0, flow=0, src=IP6_B, dst=IP6_A):
    placeholder = ipv6(udp(ib + b"\0\0\0\0", sport=sport), tclass=tclass, flow=flow, src=src, dst=dst)
    crc = icrc_v6(placeholder[:-4])
    return eth(placeholder[:-4] + crc, etype=0x86DD)


def pattern(n, start=0x10):
    return bytes((start + i) & 0xFF for i in range(n))


def write_pcap(path, frames):
    """frames: list of (usec_offset, bytes). Classic pcap, microsecond, LINKTYPE_ETHERNET."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1))
        for usec, fr in frames:
            sec, us = divmod(usec, 1000000)
            f.write(struct.pack("<IIII", T0 + sec, us, len(fr), len(fr)))
            f.write(fr)


def timeline(frames, step=1000):
    return [(i * step, fr) for i, fr in enumerate(frames)]


# --- probe sets --------------------------------------------------------------------------

def probe_opcodes():
    """One frame per BTH opcode 0x00..0xFF: BTH (destqp 0x000102, A=1) + 48 bytes 0x10,0x11,...
    so one can see which bytes tshark assigns to which extension header field."""
    frames = []
    for op in range(256):
        frames.append(roce4(bth(op, a=1, psn=op) + pattern(48)))
    return timeline(frames)


def probe_bth_bits():
    """BTH flag/reserved bits, one variation per frame (RC SEND ONLY, 64-byte payload 0x5a)."""
    body = b"\x5a" * 64
    v = [
        dict(),
        dict(se=1),
        dict(m=1),
        dict(pad=3),
        dict(tver=0xF),
        dict(pkey=0x8001),
        dict(pkey=0x0000),
        dict(byte4=0x80),          # FECN
        dict(byte4=0x40),          # BECN
        dict(byte4=0xFF),
        dict(a=1),
        dict(resv7=0x7F),
        dict(destqp=0xFFFFFF, psn=0xFFFFFF),
        dict(destqp=0x000000, psn=0x000000),
        dict(se=1, m=1, pad=2, tver=1, pkey=0x7FFF, byte4=0xC0, a=1, resv7=0x55, destqp=0xABCDEF,
             psn=0x123456),
    ]
    frames = []
    for kw in v:
        kw.setdefault("destqp", 0x000102)
        pad = kw.get("pad", 0)
        frames.append(roce4(bth(0x04, **kw) + body[:64 - pad] + b"\0" * pad))
    return timeline(frames)


def probe_aeth():
    """RC ACKNOWLEDGE (0x11) with every interesting AETH syndrome, MSN 0x000102 / 0xFFFFFF,
    plus RC ATOMIC ACKNOWLEDGE and READ RESPONSE FIRST/LAST/ONLY with a NAK-ish syndrome."""
    syn = [0x00, 0x01, 0x1F, 0x20, 0x2E, 0x3F, 0x40, 0x41, 0x5F, 0x60, 0x61, 0x62, 0x63, 0x64,
           0x7F, 0x80, 0x9F, 0xA0, 0xE1, 0xFF]
    frames = []
    for i, s in enumerate(syn):
        msn = 0x000102 if i % 2 == 0 else 0xFFFFFF
        frames.append(roce4(bth(0x11, psn=0x100 + i) + bytes([s]) + msn.to_bytes(3, "big")))
    frames.append(roce4(bth(0x12) + bytes([0x1F, 0, 0, 7]) + (0x0123456789ABCDEF).to_bytes(8, "big")))
    frames.append(roce4(bth(0x12) + bytes([0x00, 0, 0, 8]) + (0xFFFFFFFFFFFFFFFF).to_bytes(8, "big")))
    frames.append(roce4(bth(0x0D) + bytes([0x1F, 0, 0, 9]) + pattern(32)))
    frames.append(roce4(bth(0x0F) + bytes([0x1F, 0, 0, 10]) + pattern(32)))
    frames.append(roce4(bth(0x10) + bytes([0x1F, 0, 0, 11]) + pattern(32)))
    frames.append(roce4(bth(0x0E) + pattern(32)))
    # what is left after the last header decides the CRC fields: 4 -> ICRC, 6 -> ICRC + VCRC,
    # 2 -> VCRC only, anything else -> neither
    frames.append(roce4(bth(0x11) + bytes([0x1F, 0, 0, 12]) + b"\xab\xcd"))                # 6 left
    frames.append(roce4(bth(0x11) + bytes([0x1F, 0, 0, 13]) + b"\xab\xcd", icrc=False))    # 2 left
    frames.append(roce4(bth(0x11) + bytes([0x1F, 0, 0, 14]), icrc=False))                   # 0 left
    frames.append(roce4(bth(0x11) + bytes([0x1F, 0, 0, 15]) + b"\xab"))                    # 5 left
    return timeline(frames)


def probe_exth():
    """Extension headers with edge values: RETH (va 0, ~0, dmalen 0 / 0xffffffff), DETH
    (q_key 0x80010000, srcqp 0xffffff), IMMDT, IETH, AtomicETH (swap/cmp 0 and ~0),
    FLUSH (0x1C) and ATOMIC WRITE (0x1D) as rxe sends them."""
    frames = []
    reth = lambda va, rk, ln: va.to_bytes(8, "big") + rk.to_bytes(4, "big") + ln.to_bytes(4, "big")
    frames.append(roce4(bth(0x0A, a=1) + reth(0, 0, 0)))                              # WRITE ONLY 0 B
    frames.append(roce4(bth(0x0A, a=1) + reth(0xFFFFFFFFFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF) + pattern(32)))
    frames.append(roce4(bth(0x0C, a=1) + reth(0x00007F0000001000, 0x00001234, 0)))      # READ REQ 0 B
    frames.append(roce4(bth(0x0B, a=1) + reth(0x1000, 0x42, 4) + b"\x00\x00\x00\x00" + b"abcd"))  # WRITE ONLY IMM
    frames.append(roce4(bth(0x64, destqp=0x000102) + struct.pack("!II", 0x80010000, 0x00FFFFFF) + pattern(32)))
    frames.append(roce4(bth(0x64, destqp=0x000102) + struct.pack("!II", 0xFFFFFFFF, 0xAB000001) + pattern(32)))
    frames.append(roce4(bth(0x65, destqp=0x000102) + struct.pack("!II", 0x11111111, 0x13) + b"\xde\xad\xbe\xef" + pattern(32)))
    frames.append(roce4(bth(0x16) + struct.pack("!I", 0x00001234) + pattern(32)))      # SEND LAST INV
    frames.append(roce4(bth(0x17) + struct.pack("!I", 0xFFFFFFFF) + pattern(32)))      # SEND ONLY INV
    frames.append(roce4(bth(0x13, a=1) + reth(0x1000, 0x42, 8)[:12] + (0).to_bytes(8, "big") + (0xFFFFFFFFFFFFFFFF).to_bytes(8, "big")))
    frames.append(roce4(bth(0x14, a=1) + reth(0x1008, 0x42, 8)[:12] + (1).to_bytes(8, "big") + (0x8000000000000000).to_bytes(8, "big")))
    # RC FLUSH (0x1C): FETH (4 bytes: placement type/selectivity) + RETH, no payload
    frames.append(roce4(bth(0x1C, a=1) + struct.pack("!I", 0x00000011) + reth(0x2000, 0x42, 64)))
    # RC ATOMIC WRITE (0x1D): RETH + 8-byte payload
    frames.append(roce4(bth(0x1D, a=1) + reth(0x3000, 0x42, 8) + (0x0102030405060708).to_bytes(8, "big")))
    return timeline(frames)


def probe_sendlen():
    """SEND-type packets with short payloads: tshark 4.0's RPC-over-RDMA heuristic reads
    payload[12:16] before checking the length and throws on RC SEND ONLY (/INV) payloads < 16
    bytes, which leaves infiniband.invariant.crc out. Each frame uses its own QP."""
    frames = []
    qp = 0x200
    for n in list(range(0, 18)) + [20, 28]:
        frames.append(roce4(bth(0x04, destqp=qp, a=1) + b"\x5a" * n))
        qp += 1
    for op, extra in ((0x17, struct.pack("!I", 0x1234)), (0x05, b"\xca\xfe\xba\xbe"), (0x24, b""),
                      (0x64, struct.pack("!II", 0x11111111, 0x13)), (0x0A, bytes(16)),
                      (0x10, bytes([0x1F, 0, 0, 1])), (0x02, b""), (0x00, b""), (0x01, b""),
                      (0x03, b"\x01\x02\x03\x04"), (0x16, struct.pack("!I", 0x1234))):
        frames.append(roce4(bth(op, destqp=qp, a=1) + extra + b"\x5a" * 8))
        qp += 1
    # 16+ byte RC SEND ONLY payloads that the heuristic *accepts* (RDMA_MSG with matching XID)
    frames.append(roce4(bth(0x04, destqp=qp, a=1) + bytes(56)))
    qp += 1
    frames.append(roce4(bth(0x04, destqp=qp, a=1) + struct.pack("!IIII", 7, 1, 1, 3) + bytes(16)))  # RDMA_DONE
    qp += 1
    # a short SEND LAST after its SEND FIRST (consecutive PSNs, same QP): the heuristic
    # reassembles FIRST+LAST, so it reads the >= 16-byte message and does not throw
    frames.append(roce4(bth(0x00, destqp=qp, psn=100) + b"\x5a" * 32))
    frames.append(roce4(bth(0x02, destqp=qp, psn=101, a=1) + b"\x5a" * 8))
    qp += 1
    frames.append(roce4(bth(0x00, destqp=qp, psn=200) + b"\x5a" * 4))
    frames.append(roce4(bth(0x01, destqp=qp, psn=201) + b"\x5a" * 4))
    frames.append(roce4(bth(0x02, destqp=qp, psn=202, a=1) + b"\x5a" * 4))
    return timeline(frames)


def smc_payload(b0, n, length_field=None, at=None):
    """n payload bytes starting with LLC type b0 and the SMC-R length field (v1: byte 1; v2:
    bytes 1-2 big-endian; default n), zero elsewhere except at {offset: byte}."""
    b = bytearray(n)
    if n > 0:
        b[0] = b0
    ln = n if length_field is None else length_field
    if b0 >> 4 == 2:
        b[1:3] = struct.pack("!H", ln)[:max(0, min(2, n - 1))]
    elif n > 1:
        b[1] = ln & 0xFF
    for off, v in (at or {}).items():
        if off < n:
            b[off] = v
    return bytes(b)


def probe_smc():
    """Payloads that tshark 4.0's SMC-R heuristic (infiniband.payload "smc") claims: byte 0 an
    LLC type and the length field equal to the payload length (v1: 0x01-0x09 or 0xFE with byte
    1 = 44; v2: 0x21, 0x22, 0x24-0x27, 0x29 with bytes 1-2). The SMC dissector then reads the
    message; when its counts (rkeys, GIDs) reach past the payload it throws, which leaves the
    ICRC out, like the RPC-over-RDMA quirk. Random RDMA data hits this (about 4e-7 per packet,
    seen in an interop run). Mostly RC RDMA WRITE MIDDLE; each frame its own QP."""
    cases = []
    # v1: 44-byte messages; only DELETE RKEY's unbounded count (byte 4) can reach past 44
    for t in list(range(0x01, 0x0A)) + [0xFE]:
        cases.append(smc_payload(t, 44, at={4: 1, 5: 1}))
    for cnt in (9, 10, 255):
        cases.append(smc_payload(0x09, 44, at={4: cnt}))
    cases.append(smc_payload(0x03, 44, at={5: 2}))
    cases.append(smc_payload(0x06, 44, at={4: 5}))
    cases.append(smc_payload(0x08, 44, at={4: 7}))
    cases.append(smc_payload(0x02, 44, at={3: 0x80}))
    cases.append(smc_payload(0x01, 45, length_field=44))   # length mismatch: not claimed
    cases.append(smc_payload(0x0A, 44))                    # not an LLC type: not claimed
    # v2: the length is the payload length
    for t in (0x21, 0x22, 0x24, 0x25, 0x26, 0x27, 0x29, 0x23, 0x28):
        for n in (3, 4, 9, 17, 35, 36, 44, 72, 1024):
            cases.append(smc_payload(t, n))
    cases.append(smc_payload(0x21, 2))                     # too short for the v2 length field
    cases.append(smc_payload(0x21, 1))
    # ADD LINK v2 request: 72 bytes + 16 per rkey (count at 70-71); a response stops at 36
    for cnt, n in ((1, 88), (2, 88), (0x0101, 1024), (0, 71)):
        cases.append(smc_payload(0x22, n, at={70: cnt >> 8, 71: cnt & 0xFF}))
    cases.append(smc_payload(0x22, 40, at={3: 0x80}))
    # REQUEST ADD LINK v2: 28 bytes + 16 per GID (count at 24)
    for cnt, n in ((2, 60), (3, 60), (63, 1024), (64, 1024), (83, 1024)):
        cases.append(smc_payload(0x25, n, at={24: cnt}))
    # DELETE RKEY v2: 8 bytes + 4 per rkey (count at 4; a response counts byte 5, at most 8)
    for at, n in (({4: 4}, 24), ({4: 5}, 24), ({3: 0x80, 4: 200, 5: 4}, 24), ({3: 0x80, 5: 9}, 40),
                  ({3: 0x80, 5: 9}, 39), ({3: 0x80, 5: 200}, 40)):
        cases.append(smc_payload(0x29, n, at=at))
    # CONFIRM RKEY v2: 17 bytes + 13 per entry, at most 2 (count at 4)
    for cnt, n in ((1, 30), (2, 30), (2, 43), (9, 43)):
        cases.append(smc_payload(0x26, n, at={4: cnt}))
    frames = []
    qp = 0x300
    for pl in cases:
        frames.append(roce4(bth(0x07, destqp=qp, psn=qp) + pl))
        qp += 1
    # the same trigger on other opcodes, and with pad bytes (the payload tvb includes the pad)
    frames.append(roce4(bth(0x04, destqp=qp, a=1) + smc_payload(0x25, 60, at={24: 3})))
    qp += 1
    frames.append(roce4(bth(0x0A, destqp=qp, a=1) + struct.pack("!QII", 0x1000, 0x1234, 1024) +
                        smc_payload(0x25, 1024, at={24: 83})))
    qp += 1
    frames.append(roce4(bth(0x07, destqp=qp, pad=2) + smc_payload(0x25, 62, length_field=62, at={24: 2})))
    qp += 1
    frames.append(roce4(bth(0x07, destqp=qp, pad=2) + smc_payload(0x25, 62, length_field=60, at={24: 2})))
    qp += 1
    frames.append(roce4(bth(0x07, destqp=qp) + smc_payload(0x01, 44)))   # SMC claimed: no throw
    return timeline(frames)


def probe_ip():
    """Network-layer variants: IPv6 RoCEv2, ECN bits, DSCP, VLAN, ICMP quoting RoCEv2 (two IP
    headers), CX-4 style CNP, UDP sport 0/1, an Ethertype-encapsulated payload (the only case where
    infiniband.payload is filled), a truncated BTH, a non-4791 UDP packet and a backwards timestamp."""
    frames = []
    send = bth(0x04, a=1) + b"\x5a" * 32
    frames.append((0, roce4(send)))
    frames.append((1000, roce4(send, tos=0x01)))                  # ECT(1)
    frames.append((2000, roce4(send, tos=0x02)))                  # ECT(0)
    frames.append((3000, roce4(send, tos=0x03)))                  # CE
    frames.append((4000, roce4(send, tos=0xC2)))                  # DSCP 48, ECT(0)
    frames.append((5000, roce6(send)))
    frames.append((6000, roce6(send, tclass=0x03, flow=0xABCDE)))
    frames.append((6500, roce6(send, src=bytes(10) + b"\xff\xff" + IP_B,         # ::ffff:a.b.c.d
                               dst=bytes(10) + b"\xff\xff" + IP_A)))
    frames.append((7000, roce4(send, vlan=100)))
    # ICMP destination unreachable (port) quoting the whole RoCEv2 datagram
    inner = roce4(send)[14:]
    icmp = bytearray(struct.pack("!BBHI", 3, 3, 0, 0) + inner)
    icmp[2:4] = struct.pack("!H", csum16(bytes(icmp)))
    frames.append((8000, eth(ipv4(bytes(icmp), proto=1, src=IP_A, dst=IP_B), src=MAC_A, dst=MAC_B)))
    # CNP like the ConnectX-4 Lx one in scapy's roce.uts: UDP sport 0, TOS 0xc2, BECN, 16 zero bytes
    frames.append((9000, roce4(bth(0x81, destqp=0x000118, byte4=0x40, psn=0, pkey=0xFFFF) + bytes(16),
                               sport=0, tos=0xC2)))
    frames.append((10000, roce4(bth(0x81, destqp=0x000118, byte4=0x40, psn=0) + bytes(16), sport=49152)))
    frames.append((11000, roce4(send, sport=1)))                   # UDP sport 1 -> tshark MAD path
    # EtherType-encapsulated payload: 0x0800 + 0x0000 + IPv4/UDP datagram
    encap = struct.pack("!HH", 0x0800, 0) + ipv4(udp(b"hello", sport=1111, dport=2222),
                                                   src=bytes([192, 0, 2, 1]), dst=bytes([192, 0, 2, 2]))
    frames.append((12000, roce4(bth(0x04, a=1) + encap)))
    frames.append((13000, roce4(b"\x04\x00\xff\xff\x00\x00", icrc=False)))   # truncated BTH (6 bytes)
    frames.append((14000, roce4(bth(0x04, a=1), icrc=False)))              # BTH only, no ICRC
    frames.append((14100, roce4(bth(0x0A, a=1) + bytes(10), icrc=False)))  # RETH cut at 10 bytes
    frames.append((14200, roce4(bth(0x11) + b"\x1f\x00", icrc=False)))     # AETH cut at 2 bytes
    frames.append((14300, roce4(bth(0x0B, a=1) + bytes(16) + b"\x01\x02", icrc=False)))  # ImmDt cut
    frames.append((15000, eth(ipv4(udp(b"not roce", sport=5000, dport=5001)))))
    frames.append((14500, roce4(send)))                                   # timestamp goes backwards
    frames.append((-500, roce4(send)))                                    # before frame 1
    frames.append((16000, roce4(send)))
    return frames


# --- layer 2: MAC Control (802.3x PAUSE, 802.1Qbb PFC) and 802.1Q tags ------------------------

PAUSE_DST = bytes.fromhex("0180c2000001")  # 802.3 Annex 31B reserved multicast address


def macc(opcode, body=b"", dst=PAUSE_DST, src=MAC_B, pad=True, vlan=None):
    """Ethernet frame with EtherType 0x8808 (MAC Control): opcode + body, padded to 60 bytes
    (the 64-byte minimum less the FCS) unless pad=False."""
    fr = eth(struct.pack("!H", opcode) + body, etype=0x8808, vlan=vlan, src=src, dst=dst)
    if pad and len(fr) < 60:
        fr += bytes(60 - len(fr))
    return fr


def pfc(enbv, quanta, **kw):
    """802.1Qbb PFC: opcode 0x0101, class-enable vector, eight per-class pause quanta."""
    return macc(0x0101, struct.pack("!H8H", enbv, *quanta), **kw)


def probe_macc():
    """MAC Control frames: 802.3x PAUSE (opcode 1) with quanta 0, 1, 0x1234, 0xffff and to a
    unicast address; PFC (opcode 0x0101) with single-class, all-class, no-class and
    reserved-bit enable vectors; frames cut short inside the opcode, the pause time, the vector
    and the quanta (captured short, no padding); unknown opcodes; a VLAN-tagged PAUSE and PFC."""
    frames = [
        macc(0x0001, struct.pack("!H", 0)),
        macc(0x0001, struct.pack("!H", 1)),
        macc(0x0001, struct.pack("!H", 0x1234)),
        macc(0x0001, struct.pack("!H", 0xFFFF)),
        macc(0x0001, struct.pack("!H", 0x00FF), dst=MAC_A),          # unicast destination
        pfc(0x0008, [0, 0, 0, 0xFFFF, 0, 0, 0, 0]),                  # class 3 only
        pfc(0x0048, [0, 0, 0, 0x0100, 0, 0, 0x0200, 0]),             # classes 3 and 6
        pfc(0x00FF, [1, 2, 3, 4, 5, 6, 7, 0xFFFF]),                  # every class
        pfc(0x0000, [9, 9, 9, 9, 9, 9, 9, 9]),                       # no class enabled
        pfc(0x0008, [0] * 8),                                         # class 3 resume (quanta 0)
        pfc(0x0108, [0, 0, 0, 0x00AA, 0, 0, 0, 0]),                  # reserved MSB set
        pfc(0xFF01, [0x7777, 0, 0, 0, 0, 0, 0, 0]),                  # all reserved bits set
        eth(b"", etype=0x8808),                                      # no opcode at all
        eth(b"\x00", etype=0x8808),                                  # half an opcode
        eth(b"\x00\x01", etype=0x8808),                              # PAUSE without pause_time
        eth(b"\x00\x01\x12", etype=0x8808),                          # PAUSE, pause_time cut
        eth(b"\x01\x01", etype=0x8808),                              # PFC without vector
        eth(b"\x01\x01\x00", etype=0x8808),                          # PFC, vector cut
        eth(b"\x01\x01\x00\x08", etype=0x8808),                      # PFC, vector, no quanta
        eth(struct.pack("!HH3H", 0x0101, 0x0008, 1, 2, 3), etype=0x8808),   # quanta cut after c2
        eth(struct.pack("!HH7HB", 0x0101, 0x0008, 1, 2, 3, 4, 5, 6, 7, 8), etype=0x8808),  # c7 cut
        macc(0x0000, struct.pack("!H", 0x1234)),                     # unknown opcodes
        macc(0x0007, struct.pack("!H", 0x1234)),
        macc(0x0100, struct.pack("!H", 0x1234)),
        macc(0x0102, struct.pack("!H", 0x1234)),
        macc(0xFFFF, struct.pack("!H", 0x1234)),
        # EPON MPCP (802.3 clause 64): GATE, REPORT, REGISTER_REQ, REGISTER, REGISTER_ACK, whole
        # and cut inside the timestamp and inside the registration fields
        macc(0x0002, bytes(range(1, 40))),
        macc(0x0003, bytes(range(1, 40))),
        macc(0x0004, bytes(range(1, 40))),
        macc(0x0005, bytes(range(1, 40))),
        macc(0x0006, bytes(range(1, 40))),
        eth(struct.pack("!H", 0x0002) + b"\x01\x02\x03", etype=0x8808),
        eth(struct.pack("!H", 0x0004) + bytes(range(1, 6)), etype=0x8808),
        eth(struct.pack("!H", 0x0005) + bytes(range(1, 9)), etype=0x8808),
        eth(struct.pack("!H", 0x0005) + bytes(range(1, 10)), etype=0x8808),
        eth(struct.pack("!H", 0x0006) + bytes(range(1, 8)), etype=0x8808),
        macc(0x0001, struct.pack("!H", 0x0800), vlan=(3 << 13) | 100),            # tagged PAUSE
        pfc(0x0008, [0, 0, 0, 0x4000, 0, 0, 0, 0], vlan=(6 << 13) | 0x1000 | 200),  # tagged PFC, DEI
    ]
    return timeline(frames, step=250)


def probe_vlan():
    """802.1Q-tagged RoCEv2: PCP 3 on VLAN 100, PCP 6 on VLAN 200 (a CNP with DSCP 48), DEI,
    priority-tagged (VID 0), VID 4095, IPv6 over a tag, 802.1ad over 802.1Q (QinQ), a cut tag, a
    tag whose type is a length, a 0x9100 and an 802.1Q-in-802.1Q double tag, and PFC interleaved with tagged data as a switch port would see
    it: the frames that `goroce cap flows` and `cap lint` read priorities from."""
    send = bth(0x04, a=1, destqp=0x000011) + b"\x5a" * 32
    cnp = bth(0x81, destqp=0x000011, byte4=0x40, psn=0) + bytes(16)
    frames = [
        roce4(send, vlan=(3 << 13) | 100, tos=0x6A),                 # PCP 3, DSCP 26, ECT(0)
        roce4(send, vlan=(6 << 13) | 200, tos=0xC2),                 # PCP 6, DSCP 48
        roce4(cnp, vlan=(6 << 13) | 200, tos=0xC0, src=IP_A, dst=IP_B),  # CNP, PCP 6, DSCP 48
        roce4(send, vlan=(3 << 13) | 0x1000 | 100),                  # DEI set
        roce4(send, vlan=(5 << 13) | 0),                             # priority tag, VID 0
        roce4(send, vlan=(7 << 13) | 4095),
        eth(roce6(send)[14:], etype=0x86DD, vlan=(3 << 13) | 300),   # IPv6 in a tag
        # 802.1ad S-tag (VID 10, PCP 1) over a C-tag (VID 100, PCP 3)
        MAC_A + MAC_B + struct.pack("!HHHH", 0x88A8, (1 << 13) | 10, 0x8100, (3 << 13) | 100) +
        roce4(send)[12:],
        MAC_A + MAC_B + struct.pack("!HHHH", 0x9100, (2 << 13) | 20, 0x8100, (3 << 13) | 100) +
        roce4(send)[12:],
        MAC_A + MAC_B + struct.pack("!HHHH", 0x8100, (4 << 13) | 30, 0x8100, (6 << 13) | 200) +
        roce4(send)[12:],
        MAC_A + MAC_B + struct.pack("!H", 0x8100),                    # TPID, no TCI
        MAC_A + MAC_B + struct.pack("!HB", 0x8100, 0x60),            # tag cut after one byte
        MAC_A + MAC_B + struct.pack("!HH", 0x8100, (3 << 13) | 100),  # tag, no type
        # tag whose "type" is an 802.3 length (LLC follows)
        MAC_A + MAC_B + struct.pack("!HHH", 0x8100, (2 << 13) | 42, 20) + bytes.fromhex("aaaa03000000") +
        bytes(14),
        pfc(0x0008, [0, 0, 0, 0xFFFF, 0, 0, 0, 0]),
        roce4(send, vlan=(3 << 13) | 100, tos=0x6A),
        pfc(0x0008, [0] * 8),
    ]
    return timeline(frames, step=500)


PROBES = {
    "probe_opcodes": probe_opcodes,
    "probe_bth_bits": probe_bth_bits,
    "probe_aeth": probe_aeth,
    "probe_exth": probe_exth,
    "probe_sendlen": probe_sendlen,
    "probe_ip": probe_ip,
    "probe_smc": probe_smc,
    "probe_macc": probe_macc,
    "probe_vlan": probe_vlan,
}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "testdata", "tshark", "probe")
    os.makedirs(out, exist_ok=True)
    for name, fn in PROBES.items():
        path = os.path.join(out, name + ".pcap")
        write_pcap(path, fn())
        print(path)


if __name__ == "__main__":
    main()
