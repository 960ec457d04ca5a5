from django.contrib.auth import views as auth_views
from django.urls import path

from core import views

urlpatterns = [
    path("login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("system/", views.system, name="system"),
    path("account/", views.account, name="account"),
]
