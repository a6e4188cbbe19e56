//go:build !linux

package worker

// trimBase: outside Linux the base image is copied, not mapped (see
// memory_other.go), so there is no page of it to give back.
func (m *linearMemory) trimBase(uint64) (int64, error) { return 0, nil }
