"""python manage.py rubric_create FILE.yaml|FILE.json: the rubric source's command, which lives
in its package (annotate/kinds/rubric/commands.py) and is declared by it
(``KindSource.commands``). Django finds a command only in an app's management/commands, so
this module gives the name and takes the class from the registry."""

from annotate.kinds import kind_command

Command = kind_command("rubric_create")
