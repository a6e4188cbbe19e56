module execd

go 1.26.8

require (
	github.com/BurntSushi/toml v1.6.0
	github.com/google/uuid v1.6.0
	github.com/klauspost/compress v1.20.4
	github.com/tetratelabs/wazero v1.12.0
	go.uber.org/zap v1.28.0
	golang.org/x/sys v0.44.0
)

require go.uber.org/multierr v1.10.0 // indirect
