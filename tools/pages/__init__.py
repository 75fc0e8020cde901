"""What draws or writes parts of the documentation from committed results or declarations: the charts (``plots``), the argument table (``arguments``)."""
