package cm_test

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/goroce/goroce/cm"
)

// Example connects two Managers directly: every MAD one returns is handed
// to the other, as the device layer would do through QP1.
func Example() {
	client, _ := cm.New(cm.Config{LocalCAGUID: 1})
	server, _ := cm.New(cm.Config{LocalCAGUID: 2})
	cli, srv := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	service := cm.IPServiceID(cm.PortSpaceTCP, 7174) // rping's port
	_ = server.Listen(service)
	now := time.Unix(0, 0)

	_, out, _ := client.Connect(now, &cm.ConnectParams{Peer: srv, ServiceID: service, QPN: 17,
		StartingPSN: 100, ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7,
		PathMTU: cm.MTU1024, Path: cm.RoCEPath(cli, srv)})
	for len(out.Send) > 0 || len(out.Events) > 0 {
		var next cm.Output
		for _, e := range out.Events {
			fmt.Println(e.Kind, "QPN", e.QP.LocalQPN, "→", e.QP.RemoteQPN)
			if e.Kind == cm.EventConnectRequest {
				_, o, _ := server.Accept(now, e.ID, &cm.AcceptParams{QPN: 18, StartingPSN: 200,
					ResponderResources: 1, InitiatorDepth: 1, RNRRetryCount: 7})
				next.Send = append(next.Send, o.Send...)
			}
		}
		for _, d := range out.Send {
			m, _ := cm.Parse(d.MAD)
			fmt.Println("send", m.AttrID(), "to", d.Peer)
			var o cm.Output
			if d.Peer == srv {
				o = server.Receive(now, cli, d.MAD)
			} else {
				o = client.Receive(now, srv, d.MAD)
			}
			next.Send = append(next.Send, o.Send...)
			next.Events = append(next.Events, o.Events...)
		}
		out = next
	}
	// Output:
	// send REQ to 10.0.0.2
	// ConnectRequest QPN 0x000000 → 0x000011
	// send REP to 10.0.0.1
	// Established QPN 0x000011 → 0x000012
	// send RTU to 10.0.0.2
	// Established QPN 0x000012 → 0x000011
}
