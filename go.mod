module github.com/goroce/goroce

go 1.26

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/gopacket/gopacket v1.7.7 // indirect
	github.com/stretchr/testify v1.12.1 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
