package proxyd

// StoreReleasesMemory reports whether m's store gives memory back when
// proxyd has been idle (releaseStoreMemory).
func StoreReleasesMemory(m *Main) bool {
	_, ok := m.store.(memoryReleaser)
	return ok
}
