from core.roles import is_admin, is_researcher


def roles(request) -> dict:
    user = getattr(request, "user", None)
    return {"user_is_admin": is_admin(user), "user_is_researcher": is_researcher(user)}
