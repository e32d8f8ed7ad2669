// Package bth holds the Base Transport Header (IBA 9.2) as a zero-copy view,
// the 24-bit PSN and QPN value types, and the one static opcode table of the
// project — the analogue of rxe's rxe_opcode.c: for every RC, UC and UD
// opcode of IBA (plus RC FLUSH 0x1C, RC ATOMIC WRITE 0x1D and the RoCEv2 CNP
// 0x81) its name, extension-header mask, header length, FIRST/MIDDLE/LAST/
// ONLY position, request/response role and whether it carries a payload.
//
// Parse checks a buffer's length once and returns a Header view whose
// accessors (Opcode, DestQP, PSN, AckReq, …) and setters work in place;
// Header.Encode writes a whole BTH from Fields. An Opcode answers what the
// table knows of it (HeaderLen, Mask, IsFirst, IsRequest, …; Lookup gives
// the row, Info, with the offset of each extension header).
//
// PSN arithmetic is modular and goes only through PSN methods; Compare is
// bit-for-bit rxe's psn_compare.
//
// Programs doing RDMA import roce and never see this package: the transport
// engine (package qp) and the decoders (packages wire, rocev2, capture) use
// it.
package bth
