from ncdoc.cli.main import entry

entry()
