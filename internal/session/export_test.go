package session

// Users is how many statements want the connection's turn or have it.
func (c *Conn) Users() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.users
}
