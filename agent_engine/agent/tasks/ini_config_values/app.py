import configparser


def load(path="settings.ini"):
    """(name, debug, workers) from the [app] section."""
    cp = configparser.ConfigParser()
    cp.read(path)
    app = cp["app"]
    return app["name"], app.getboolean("debug"), app.getint("workers")
