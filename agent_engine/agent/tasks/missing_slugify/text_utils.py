def slugify(title):
    """'Hello, World!' -> 'hello-world'."""
    raise NotImplementedError
