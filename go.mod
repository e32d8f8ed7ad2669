module github.com/goroce/goroce

go 1.26.0

require (
	github.com/cespare/xxhash/v2 v2.3.0
	github.com/gopacket/gopacket v1.7.7
	github.com/prometheus/client_model v0.6.3
	github.com/prometheus/common v0.73.1
	github.com/stretchr/testify v1.12.1
	golang.org/x/net v0.61.0
	golang.org/x/sys v0.49.0
)

require (
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/pandatix/go-abnf v0.5.3 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
